// The group-wise int4 linear on the CPU against an fp64 reference: integer-valued cases that
// must match bit for bit, random cases within a stated bound, both numeric forms, every group
// size, edge shapes, padded leading dimensions, poisoned outputs and guard bytes; every CPU
// variant forced; the CUDA lane layout's algorithm built for the CPU (w4_lanes_*); bad input.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "check_library.h"
#include "pipeline_call.h"
#include "registry.h"
#include "validate.h"
#include "w4_lanes_bf16.h"
#include "w4_lanes_fp16.h"
#include "w4_mma_bf16.h"
#include "w4_mma_fp16.h"
#include "w4_linear_call.h"
#include "w4_linear_case.h"

using test::Guarded;
using test::W4Buffers;
using test::W4Case;
using test::W4Runner;

namespace {

schedx_status run_on_cpu(const W4Case &c, W4Buffers &b) {
    return schedx_w4_linear(b.x->data(), c.m, c.k, c.ldx, c.x_dtype, b.w->as<uint32_t>(), c.n, c.ldw, c.group,
                            b.scales->data(), c.zeros ? b.zeros->data() : nullptr, c.scales_dtype,
                            c.bias ? b.bias->data() : nullptr, b.y->data(), c.ldy, SCHEDX_DEVICE_CPU, nullptr);
}

std::string check(W4Case c, uint32_t seed, const W4Runner &run = run_on_cpu, double *worst = nullptr) {
    return test::check_w4_linear(c, seed, run, worst);
}

struct Types {
    schedx_dtype x, s;
};
const Types kTypes[] = {{SCHEDX_BF16, SCHEDX_BF16}, {SCHEDX_BF16, SCHEDX_FP16}, {SCHEDX_FP16, SCHEDX_FP16},
                        {SCHEDX_FP16, SCHEDX_BF16}};

}  // namespace

TEST_CASE("w4_linear: integer inputs match exactly, both forms, every group size, edge shapes") {
    struct Shape {
        int64_t n, k, ldx, ldw, ldy;
    };
    // K one group up to several; N 1, odd, past the CPU tiles; padded rows.
    const Shape shapes[] = {{1, 128, 0, 0, 0}, {3, 256, 0, 0, 0}, {33, 384, 0, 0, 0}, {7, 256, 260, 40, 9}};
    uint32_t seed = 1;
    for (const Types &t : kTypes) {
        for (int64_t group : {32, 64, 128}) {
            for (bool zeros : {false, true}) {
                for (bool bias : {false, true}) {
                    for (int64_t m : {1, 2, 4, 5}) {
                        for (const Shape &s : shapes) {
                            CAPTURE(t.x);
                            CAPTURE(t.s);
                            CAPTURE(group);
                            CAPTURE(zeros);
                            CAPTURE(bias);
                            CAPTURE(m);
                            CAPTURE(s.n);
                            CAPTURE(s.k);
                            W4Case c{m, s.n, s.k, group, s.ldx, s.ldw, s.ldy, t.x, t.s, zeros, bias};
                            CHECK(check(c, seed++) == "");
                        }
                    }
                }
            }
        }
    }
}

TEST_CASE("w4_linear: random inputs within 1e-2 |y| + 1e-5 sum |terms| of an fp64 reference") {
    double worst = 0;
    uint32_t seed = 100;
    for (const Types &t : kTypes) {
        for (bool zeros : {false, true}) {
            for (int64_t m : {1, 4, 7}) {
                for (auto nkg : {std::array<int64_t, 3>{1, 1024, 128}, {40, 96, 32}, {129, 512, 64}, {8, 4096, 128}}) {
                    CAPTURE(t.x);
                    CAPTURE(t.s);
                    CAPTURE(zeros);
                    CAPTURE(m);
                    CAPTURE(nkg[0]);
                    CAPTURE(nkg[1]);
                    W4Case c{m, nkg[0], nkg[1], nkg[2], 0, 0, 0, t.x, t.s, zeros, zeros, false};
                    CHECK(check(c, seed++, run_on_cpu, &worst) == "");
                }
            }
        }
    }
    MESSAGE("w4_linear CPU: largest relative error against fp64: " << worst);
}

TEST_CASE("w4_linear: every CPU variant, forced") {
    const std::vector<schedx_variant_info> infos = test::variant_infos("w4_linear", "cpu");
    CHECK(infos.size() == 10);
    for (const schedx_variant_info &info : infos) {
        const auto p = test::params_of(info);
        W4Case c{5, 33, 256, 64, 0, 0, 40};
        c.x_dtype = p.at("x_type") == "fp16" ? SCHEDX_FP16 : SCHEDX_BF16;
        c.scales_dtype = p.at("scale_type") == "fp16" ? SCHEDX_FP16 : SCHEDX_BF16;
        CAPTURE(info.name);
        REQUIRE(schedx_force_variant("w4_linear", info.name) == SCHEDX_OK);
        for (bool zeros : {false, true}) {
            c.zeros = c.bias = zeros;
            CHECK(check(c, 7) == "");
            CHECK(schedx_last_variant("w4_linear") == std::string(info.name));
            CHECK(schedx_last_reason("w4_linear") == std::string("forced"));
        }
        // A variant of other dtypes does not serve the call.
        W4Case other = c;
        other.scales_dtype = c.scales_dtype == SCHEDX_BF16 ? SCHEDX_FP16 : SCHEDX_BF16;
        other.x_dtype = c.x_dtype == SCHEDX_BF16 ? SCHEDX_FP16 : SCHEDX_BF16;
        CHECK(check(other, 7).find("status 11") == 0);
    }
    // The batch-4 tile computes 4 rows of x per pass: it refuses fewer.
    REQUIRE(schedx_force_variant("w4_linear", "w4_linear_bf16_sbf16_cpu_b4_r2") == SCHEDX_OK);
    CHECK(schedx_forced_variant("w4_linear") == std::string("w4_linear_bf16_sbf16_cpu_b4_r2"));
    CHECK(schedx_forced_variant("w8_linear") == nullptr);
    CHECK(check({3, 8, 64}, 1).find("status 11") == 0);
    CHECK(schedx_force_variant("w4_linear", nullptr) == SCHEDX_OK);
    CHECK(schedx_forced_variant("w4_linear") == nullptr);
    // A caller's own path (the torch ops' CPU GEMM) shows in last_variant until the op's next call.
    CHECK(schedx_record_outside_call("w4_linear", "w4_linear_torch_gemm", "why") == SCHEDX_OK);
    CHECK(schedx_last_variant("w4_linear") == std::string("w4_linear_torch_gemm"));
    CHECK(schedx_last_reason("w4_linear") == std::string("why"));
    CHECK(schedx_record_outside_call(nullptr, "a", "b") == SCHEDX_ERR_NULL_POINTER);
    CHECK(check({3, 8, 64}, 1) == "");
    CHECK(schedx_last_variant("w4_linear") == std::string("w4_linear_bf16_sbf16_cpu_r4"));
    // From M = 4 the batch-4 tile that fits the running build's registers (w4::cpu_tile_vectors):
    // R = 3 (17 vectors) with AVX-512's 32, R = 2 (12) with AVX2's 16, where R = 3 spills.
    const std::string tile = schedx::cpu_vector_registers() == 32 ? "cpu_b4_r3" : "cpu_b4_r2";
    for (int64_t m : {4, 16}) {
        CHECK(check({m, 8, 64}, 1) == "");
        CHECK(schedx_last_variant("w4_linear") == "w4_linear_bf16_sbf16_" + tile);
    }
}

TEST_CASE("w4_linear: empty operands") {
    for (bool bias : {false, true}) {
        CAPTURE(bias);
        // K = 0: y is the bias (or 0), rounded to x's dtype.
        CHECK(check({3, 5, 0, 32, 0, 0, 0, SCHEDX_BF16, SCHEDX_BF16, false, bias}, 1) == "");
        CHECK(check({2, 9, 0, 128, 0, 0, 0, SCHEDX_FP16, SCHEDX_BF16, true, bias}, 1) == "");
    }
    // K = 0 with leading dimensions past what a Halide buffer holds: x and w are empty, so
    // nothing reads them and their leading dimensions bound nothing (found by fuzz_abi).
    {
        uint16_t out[2][5], bias16[5] = {0x3F80, 0x4000, 0xBF80, 0x0000, 0x3F00};
        std::memset(out, 0xA5, sizeof out);
        const int64_t huge = int64_t(1) << 31;
        CHECK(schedx_w4_linear(nullptr, 2, 0, huge, SCHEDX_BF16, nullptr, 5, huge, 32, nullptr, nullptr, SCHEDX_BF16,
                               bias16, &out[0][0], 5, SCHEDX_DEVICE_CPU, nullptr) == SCHEDX_OK);
        for (int r = 0; r < 2; r++) {
            for (int c = 0; c < 5; c++) CHECK(out[r][c] == bias16[c]);
        }
    }
    // M = 0 or N = 0 writes nothing: the empty operands' pointers may be NULL.
    uint16_t y = 0x1234, x[64] = {}, scales[3] = {};
    uint32_t w[24] = {};
    CHECK(schedx_w4_linear(nullptr, 0, 64, 64, SCHEDX_BF16, w, 3, 8, 64, scales, nullptr, SCHEDX_BF16, nullptr,
                           nullptr, 3, SCHEDX_DEVICE_CPU, nullptr) == SCHEDX_OK);
    CHECK(schedx_w4_linear(x, 1, 64, 64, SCHEDX_BF16, nullptr, 0, 8, 64, nullptr, nullptr, SCHEDX_BF16, nullptr,
                           nullptr, 1, SCHEDX_DEVICE_CPU, nullptr) == SCHEDX_OK);
    CHECK(y == 0x1234);
}

TEST_CASE("w4_linear: bad arguments give their status and message, and write nothing") {
    struct Bad {
        const char *what;
        schedx_status status;
        const char *message;
        std::function<schedx_status(W4Case &, W4Buffers &)> call;
    };
    auto call = [](const W4Case &c, W4Buffers &b, int64_t group, const void *x, const uint32_t *w, int64_t ldw,
                   schedx_dtype xt, schedx_dtype st, int device) {
        return schedx_w4_linear(x, c.m, c.k, c.k, xt, w, c.n, ldw, group, b.scales->data(), nullptr, st, nullptr,
                                b.y->data(), c.n, schedx_device(device), nullptr);
    };
    const Bad bad[] = {
        {"group 48", SCHEDX_ERR_BAD_SIZE, "group_size 48 is not 32, 64 or 128",
         [&](W4Case &c, W4Buffers &b) { return call(c, b, 48, b.x->data(), b.w->as<uint32_t>(), 8, SCHEDX_BF16, SCHEDX_BF16, 0); }},
        {"K off the group", SCHEDX_ERR_BAD_SIZE, "is not a multiple of group_size (128)",
         [&](W4Case &c, W4Buffers &b) { return call(c, b, 128, b.x->data(), b.w->as<uint32_t>(), 8, SCHEDX_BF16, SCHEDX_BF16, 0); }},
        {"ldw short", SCHEDX_ERR_BAD_LEADING_DIM, "ldw (7) is smaller than k / 8 (8)",
         [&](W4Case &c, W4Buffers &b) { return call(c, b, 32, b.x->data(), b.w->as<uint32_t>(), 7, SCHEDX_BF16, SCHEDX_BF16, 0); }},
        {"x fp32", SCHEDX_ERR_UNSUPPORTED_DTYPE, "x_dtype 2 is not bf16 or fp16",
         [&](W4Case &c, W4Buffers &b) { return call(c, b, 32, b.x->data(), b.w->as<uint32_t>(), 8, SCHEDX_FP32, SCHEDX_BF16, 0); }},
        {"scales int8", SCHEDX_ERR_UNSUPPORTED_DTYPE, "scales_dtype 3 is not bf16 or fp16",
         [&](W4Case &c, W4Buffers &b) { return call(c, b, 32, b.x->data(), b.w->as<uint32_t>(), 8, SCHEDX_BF16, SCHEDX_INT8, 0); }},
        {"w misaligned", SCHEDX_ERR_MISALIGNED, "w is not aligned to its 4-byte elements",
         [&](W4Case &c, W4Buffers &b) {
             return call(c, b, 32, b.x->data(), reinterpret_cast<const uint32_t *>(b.w->data() + 2), 8, SCHEDX_BF16, SCHEDX_BF16, 0);
         }},
        {"x NULL", SCHEDX_ERR_NULL_POINTER, "x is NULL",
         [&](W4Case &c, W4Buffers &b) { return call(c, b, 32, nullptr, b.w->as<uint32_t>(), 8, SCHEDX_BF16, SCHEDX_BF16, 0); }},
        {"device 5", SCHEDX_ERR_BAD_DEVICE, "device 5 is not a schedx_device",
         [&](W4Case &c, W4Buffers &b) { return call(c, b, 32, b.x->data(), b.w->as<uint32_t>(), 8, SCHEDX_BF16, SCHEDX_BF16, 5); }},
    };
    for (const Bad &b : bad) {
        CAPTURE(b.what);
        W4Case c{2, 3, 64};
        const std::string err = check(c, 1, [&](const W4Case &cc, W4Buffers &buf) {
            W4Case copy = cc;
            return b.call(copy, buf);
        });
        CHECK(err.find("status " + std::to_string(b.status) + ": ") == 0);
        CHECK(err.find(b.message) != std::string::npos);
        CHECK(err.find("(and y was written)") == std::string::npos);
    }
}

// dequantize(W) = (u - z) * s rounded once: every nibble value, both forms, every group size
// and type pair, ragged N, padded rows of W (nibbles 15) and of out (left poisoned), guards.
TEST_CASE("w4_dequantize: bit for bit against (u - z) * s rounded once, both forms, padded rows") {
    struct Shape {
        int64_t n, k, ldw, ldo;
    };
    const Shape shapes[] = {{1, 128, 16, 128}, {3, 256, 36, 260}, {17, 384, 48, 386}};
    uint32_t seed = 7;
    for (const Types &t : kTypes) {
        for (int64_t group : {32, 64, 128}) {
            for (bool zeros : {false, true}) {
                for (const Shape &sh : shapes) {
                    CAPTURE(t.x);
                    CAPTURE(t.s);
                    CAPTURE(group);
                    CAPTURE(zeros);
                    CAPTURE(sh.n);
                    seed++;
                    const int64_t groups = sh.k / group;
                    test::Guarded w(size_t(sh.n * sh.ldw) * 4), scales(size_t(sh.n * groups) * 2),
                        zero_points(size_t(sh.n * groups) * 2), out(size_t(sh.n * sh.ldo) * 2);
                    for (int64_t i = 0; i < sh.n; i++) {
                        for (int64_t j = 0; j < sh.ldw; j++) {
                            w.as<uint32_t>()[i * sh.ldw + j] = j < sh.k / 8 ? test::w4_hash(i, j, seed, 2) : 0xFFFFFFFFu;
                        }
                        for (int64_t g = 0; g < groups; g++) {
                            const uint32_t r = test::w4_hash(i, g, seed, 3);
                            const double s = (1.0 + double(r % 1000) / 1000.0) * std::ldexp(1.0, int(r % 8) - 4);
                            scales.as<uint16_t>()[i * groups + g] = test::round_to_half(s, t.s);
                            zero_points.as<uint16_t>()[i * groups + g] = test::round_to_half(double(r % 17), t.s);
                        }
                    }
                    REQUIRE(schedx_w4_dequantize(w.as<uint32_t>(), sh.n, sh.k, sh.ldw, group, scales.data(),
                                                 zeros ? zero_points.data() : nullptr, t.s, t.x, out.data(), sh.ldo,
                                                 SCHEDX_DEVICE_CPU, nullptr) == SCHEDX_OK);
                    int faults = 0;
                    for (int64_t i = 0; i < sh.n; i++) {
                        for (int64_t kk = 0; kk < sh.k; kk++) {
                            const int64_t gi = i * groups + kk / group;
                            const double u = double((w.as<uint32_t>()[i * sh.ldw + kk / 8] >> (4 * (kk % 8))) & 0xF);
                            const double z = zeros ? test::half_value(zero_points.as<uint16_t>()[gi], t.s) : 8.0;
                            const double want = (u - z) * test::half_value(scales.as<uint16_t>()[gi], t.s);
                            faults += out.as<uint16_t>()[i * sh.ldo + kk] != test::round_to_half(want, t.x);
                        }
                        for (int64_t b = sh.k * 2; b < sh.ldo * 2; b++) faults += out.data()[i * sh.ldo * 2 + b] != test::kPoison;
                    }
                    CHECK(faults == 0);
                    CHECK(out.guards_intact());
                }
            }
        }
    }
}

TEST_CASE("w4_dequantize: empty operands, and bad arguments give their status and message, writing nothing") {
    test::Guarded w(64 * 4), scales(8 * 2), out(64 * 2 + 4);
    CHECK(schedx_w4_dequantize(nullptr, 0, 64, 8, 32, nullptr, nullptr, SCHEDX_BF16, SCHEDX_BF16, nullptr, 64,
                               SCHEDX_DEVICE_CPU, nullptr) == SCHEDX_OK);
    CHECK(schedx_w4_dequantize(nullptr, 4, 0, 0, 32, nullptr, nullptr, SCHEDX_BF16, SCHEDX_BF16, nullptr, 0,
                               SCHEDX_DEVICE_CPU, nullptr) == SCHEDX_OK);
    struct Bad {
        const char *what;
        schedx_status status;
        const char *message;
        std::function<schedx_status()> call;
    };
    // One row of K = 64 (two groups of 32): w 8 words, out 64 elements.
    auto call = [&](int64_t group, int64_t ldw, int64_t ldo, schedx_dtype st, schedx_dtype ot, void *o) {
        return schedx_w4_dequantize(w.as<uint32_t>(), 1, 64, ldw, group, scales.data(), nullptr, st, ot, o, ldo,
                                    SCHEDX_DEVICE_CPU, nullptr);
    };
    const Bad bad[] = {
        {"group 48", SCHEDX_ERR_BAD_SIZE, "group_size 48 is not 32, 64 or 128",
         [&] { return call(48, 8, 64, SCHEDX_BF16, SCHEDX_BF16, out.data()); }},
        {"K off the group", SCHEDX_ERR_BAD_SIZE, "is not a multiple of group_size (128)",
         [&] { return call(128, 8, 64, SCHEDX_BF16, SCHEDX_BF16, out.data()); }},
        {"ldw short", SCHEDX_ERR_BAD_LEADING_DIM, "ldw (7) is smaller than k / 8 (8)",
         [&] { return call(32, 7, 64, SCHEDX_BF16, SCHEDX_BF16, out.data()); }},
        {"ldo short", SCHEDX_ERR_BAD_LEADING_DIM, "ldo (63) is smaller than k (64)",
         [&] { return call(32, 8, 63, SCHEDX_BF16, SCHEDX_BF16, out.data()); }},
        {"ldo odd", SCHEDX_ERR_BAD_LEADING_DIM, "ldo (65) is odd",
         [&] { return call(32, 8, 65, SCHEDX_BF16, SCHEDX_BF16, out.data()); }},
        {"out fp32", SCHEDX_ERR_UNSUPPORTED_DTYPE, "out_dtype 2 is not bf16 or fp16",
         [&] { return call(32, 8, 64, SCHEDX_BF16, SCHEDX_FP32, out.data()); }},
        {"scales int8", SCHEDX_ERR_UNSUPPORTED_DTYPE, "scales_dtype 3 is not bf16 or fp16",
         [&] { return call(32, 8, 64, SCHEDX_INT8, SCHEDX_BF16, out.data()); }},
        {"out off its words", SCHEDX_ERR_MISALIGNED, "out is not 4-byte aligned",
         [&] { return call(32, 8, 64, SCHEDX_BF16, SCHEDX_BF16, out.data() + 2); }},
        {"out NULL", SCHEDX_ERR_NULL_POINTER, "out is NULL", [&] { return call(32, 8, 64, SCHEDX_BF16, SCHEDX_BF16, nullptr); }},
        {"out over w", SCHEDX_ERR_OVERLAP, "overlap", [&] { return call(32, 8, 64, SCHEDX_BF16, SCHEDX_BF16, w.data()); }},
    };
    for (const Bad &b : bad) {
        CAPTURE(b.what);
        CHECK(b.call() == b.status);
        CHECK(std::string(schedx_last_error()).find(b.message) != std::string::npos);
        CHECK(out.untouched());
    }
}

// The CUDA GEMV's algorithm (16-byte vectors, nibble positions, 2^23 magic, x scaled by
// 16^-p, lanes past K, rows past N, the five halvings) built for the CPU with Halide's default
// schedule (tests/CMakeLists.txt), through the runtime's binding.
TEST_CASE("w4_linear lane layout on the CPU: vectors, groups, rows past N, lanes past K") {
    const struct {
        test::CheckLibrary library;
        schedx_dtype x, s;
    } libs[] = {{SCHEDX_CHECK_LIBRARY(w4_lanes_bf16), SCHEDX_BF16, SCHEDX_BF16},
                {SCHEDX_CHECK_LIBRARY(w4_lanes_fp16), SCHEDX_FP16, SCHEDX_FP16}};
    uint32_t seed = 500;
    for (const auto &lib : libs) {
        const schedx::Variant v = test::check_library_variant(lib.library, "w4_linear");
        const W4Runner run = [&v](const W4Case &c, W4Buffers &b) {
            const schedx::W4LinearCall call_args{b.x->data(), c.m, c.k, c.ldx, b.w->as<uint32_t>(), c.n, c.ldw, c.group,
                                                 b.scales->data(), c.zeros ? b.zeros->data() : nullptr,
                                                 c.bias ? b.bias->data() : nullptr, b.y->data(), c.ldy};
            schedx::PipelineCall call(v, nullptr);
            schedx::bind_w4_linear(call, call_args, nullptr);
            return call.run();
        };
        // K: one vector, one group, more vectors than a warp's lanes (1024 + 32 = 33 vectors).
        for (auto nkg : {std::array<int64_t, 3>{1, 32, 32}, {5, 128, 64}, {3, 1056, 32}, {9, 2048, 128}}) {
            for (bool zeros : {false, true}) {
                for (int64_t m : {1, 2}) {
                    CAPTURE(lib.library.name);
                    CAPTURE(nkg[1]);
                    CAPTURE(zeros);
                    W4Case c{m, nkg[0], nkg[1], nkg[2], nkg[1] + 8, nkg[1] / 8 + 4, 0, lib.x, lib.s, zeros, zeros};
                    CHECK(check(c, seed++, run) == "");
                }
            }
        }
    }
}

// The CUDA tensor-core kernels' algorithm (nibble pairs into M0's mantissa, the k slots of each
// mma, the X tile of ones, each group's sums scaled apart, split parts, tiles past N and M) built
// for the CPU with each mma computed by its definition, through the runtime's binding.
TEST_CASE("w4_linear tensor-core algorithm on the CPU: fragments, groups, split parts, tiles past N and M") {
    const struct {
        test::CheckLibrary library;
        schedx_dtype x, s;
        std::vector<std::array<int64_t, 3>> nkg;  // N, K, group: groups of at least one chunk
    } libs[] = {
        // 16 rows a tile, chunks of 128 (load_words 4), 3 parts: one group (two parts add zeros), 4 groups.
        {SCHEDX_CHECK_LIBRARY(w4_mma_bf16), SCHEDX_BF16, SCHEDX_BF16, {{1, 128, 128}, {17, 512, 128}, {40, 384, 128}}},
        // 32 rows a warp, chunks of 32 (load_words 1), 2 parts: every group size, odd group counts.
        {SCHEDX_CHECK_LIBRARY(w4_mma_fp16), SCHEDX_FP16, SCHEDX_FP16, {{5, 96, 32}, {33, 192, 64}, {70, 384, 128}}},
    };
    uint32_t seed = 700;
    for (const auto &lib : libs) {
        const schedx::Variant v = test::check_library_variant(lib.library, "w4_linear");
        const W4Runner run = [&v](const W4Case &c, W4Buffers &b) {
            const schedx::W4LinearCall call_args{b.x->data(), c.m, c.k, c.ldx, b.w->as<uint32_t>(), c.n, c.ldw, c.group,
                                                 b.scales->data(), c.zeros ? b.zeros->data() : nullptr,
                                                 c.bias ? b.bias->data() : nullptr, b.y->data(), c.ldy};
            schedx::PipelineCall call(v, nullptr);
            schedx::bind_w4_linear(call, call_args, nullptr);
            return call.run();
        };
        for (const auto &nkg : lib.nkg) {
            for (bool zeros : {false, true}) {
                for (int64_t m : {1, 9, 17}) {  // one row, past a tile of 8, past 16
                    for (bool integer : {true, false}) {
                        CAPTURE(lib.library.name);
                        CAPTURE(nkg[0]);
                        CAPTURE(nkg[1]);
                        CAPTURE(zeros);
                        CAPTURE(m);
                        W4Case c{m, nkg[0], nkg[1], nkg[2], nkg[1] + 8, nkg[1] / 8 + 4, nkg[0] + 1, lib.x, lib.s, zeros, zeros};
                        c.integer = integer;
                        CHECK(check(c, seed++, run) == "");
                    }
                }
            }
        }
    }
}

// Untuned CUDA dispatch reads shapes, leading dimensions and pointer bits only: checked here
// for an sm_90 device without one (the candidates as schedx_w4_linear lists them, cuBLAS
// taken as loaded).
TEST_CASE("untuned CUDA dispatch of w4_linear: the GEMV at M = 1 (2 or 4 rows a warp by N), small-batch at 2, tensor cores to 64, then dequantize + cuBLAS") {
    struct Call {
        int64_t m, n, k, x_offset;  // x_offset: bytes past a 16-byte boundary
        const char *first;          // the first choice's name, after w4_linear_<x>_s<scales>_
        int64_t group = 128;
        const char *x = "bf16";     // x's and the scales' dtype (fp16: no batch-32 tensor-core variant)
    };
    const Call calls[] = {
        {1, 8192, 8192, 0, "gemv_r4"},
        {1, 4096, 14336, 0, "gemv_r2"},  // N = 4096: 2 rows a warp fill the wave
        {1, 6144, 4096, 0, "gemv_r4"},
        {1, 128256, 4096, 0, "gemv_r4"},
        {2, 8192, 8192, 0, "b2_r4"},
        {3, 4096, 4096, 0, "mma_b8_r16w4_splitk4"},
        {4, 4097, 4096, 0, "mma_b8_r16w4_splitk4"},  // ragged N
        {8, 28672, 4096, 0, "mma_b8_r16w4_splitk4"},
        {9, 8192, 8192, 0, "mma_b16_r16w4_splitk4"},
        {16, 8192, 8192, 0, "mma_b16_r16w4_splitk4"},
        {17, 8192, 8192, 0, "mma_b32_r16w1_splitk8"},
        {64, 4096, 14336, 0, "mma_b32_r16w1_splitk8"},  // two passes of 32
        {65, 8192, 8192, 0, "dequant_cublas"},
        {4096, 8192, 8192, 0, "dequant_cublas"},
        {4, 4096, 4096, 0, "mma_b8_r16w1_splitk8", 64},  // groups of 64: chunks of 32 only
        {4, 4096, 4096, 2, "dequant_cublas"},  // x off 16 bytes: no lane or mma kernel, cuBLAS before the general one
        {1, 4096, 4096, 2, "dequant_cublas"},
        {3, 4096, 0, 0, "cuda_general"},  // K = 0: only the general variant
        {100, 65536, 65536, 0, "mma_b32_r16w1_splitk8"},  // N x K past Halide's 32-bit indexing of the workspace
        {32, 4096, 4096, 0, "mma_b16_r16w4_splitk4", 128, "fp16"},  // two passes of 16
        {40, 4096, 4096, 0, "mma_b16_r16w1_splitk8", 64, "fp16"},
    };
    const uintptr_t base = uintptr_t(1) << 20;  // never dereferenced: the rules read pointer bits only
    for (const Call &call : calls) {
        std::vector<const schedx::Variant *> candidates;
        for (const schedx::Variant &v : schedx::registry()) {
            if (v.op == "w4_linear" && v.device == schedx::Device::cuda && v.param("x_type") == call.x &&
                v.param("scale_type") == call.x) {
                candidates.push_back(&v);
            }
        }
        const std::string prefix = std::string("w4_linear_") + call.x + "_s" + call.x + "_";
        CAPTURE(call.x);
        CAPTURE(call.m);
        CAPTURE(call.n);
        CAPTURE(call.k);
        CAPTURE(call.x_offset);
        const void *x = reinterpret_cast<const void *>(base + uintptr_t(call.x_offset));
        const auto *w = reinterpret_cast<const uint32_t *>(base << 4);
        const schedx::W4LinearCall c{x, call.m, call.k, call.k, w, call.n, call.k / 8, call.group,
                                     reinterpret_cast<const void *>(base << 8), nullptr, nullptr,
                                     reinterpret_cast<void *>(base << 12), call.n};
        const schedx::RunKey key{c.m, c.n, c.k, c.ldx, c.ldw, c.ldy, schedx::misalignment(x), schedx::misalignment(w),
                                 call.group, 0, 0, 0};
        const auto ranked = schedx::runnable_w4_variants(candidates, key, 90, c);
        REQUIRE(!ranked->empty());
        CHECK(ranked->front()->name == prefix + call.first);
        // The general variant takes every call, last.
        CHECK(ranked->back()->name == prefix + "cuda_general");
    }
}

// The dequantize + cuBLAS path looks its bias epilogue up by dtypes at run time: one must be
// registered for each kind the path serves, or a call with bias fails on the GPU only.
TEST_CASE("w4_linear: every dequantize kind has its bias epilogue registered") {
    const std::vector<schedx_variant_info> epilogues = test::all_variant_infos("w4_linear_epilogue", "cuda");
    int paths = 0;
    for (const schedx_variant_info &path : test::variant_infos("w4_linear", "cuda")) {
        auto p = test::params_of(path);
        if (p["stage"] != "dequantize") continue;
        paths++;
        CAPTURE(path.name);
        const auto found = std::count_if(epilogues.begin(), epilogues.end(), [&](const schedx_variant_info &e) {
            auto q = test::params_of(e);
            return q["x_type"] == p["x_type"] && q["scale_type"] == p["scale_type"];
        });
        CHECK(found == 1);
    }
    CHECK(paths == 4);
}
