// The group-wise int4 linear on the CPU against an fp64 reference: integer-valued cases that
// must match bit for bit, random cases within a stated bound, both numeric forms, every group
// size, edge shapes, padded leading dimensions, poisoned outputs and guard bytes; every CPU
// variant forced; the CUDA lane layout's algorithm built for the CPU (w4_lanes_*); bad input.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "check_library.h"
#include "w4_lanes_bf16.h"
#include "w4_lanes_fp16.h"
#include "w4_linear_call.h"
#include "w8_linear_case.h"  // round_to_half, half_value

using test::Guarded;

namespace {

struct W4Case {
    int64_t m, n, k, group = 32;
    int64_t ldx = 0, ldw = 0, ldy = 0;  // 0: tight (ldw in words)
    schedx_dtype x_dtype = SCHEDX_BF16, scales_dtype = SCHEDX_BF16;
    bool zeros = false, bias = false;
    bool integer = true;  // integer x and z, power-of-two scales: y must be exact
};

struct W4Buffers {
    Guarded *x, *w, *scales, *zeros, *bias, *y;
};
using W4Runner = std::function<schedx_status(const W4Case &, W4Buffers &)>;

schedx_status run_on_cpu(const W4Case &c, W4Buffers &b) {
    return schedx_w4_linear(b.x->data(), c.m, c.k, c.ldx, c.x_dtype, b.w->as<uint32_t>(), c.n, c.ldw, c.group,
                            b.scales->data(), c.zeros ? b.zeros->data() : nullptr, c.scales_dtype,
                            c.bias ? b.bias->data() : nullptr, b.y->data(), c.ldy, SCHEDX_DEVICE_CPU, nullptr);
}

uint32_t hash(int64_t a, int64_t b, uint32_t seed, uint32_t salt) {
    return test::mix(uint32_t(a * 7919 + b) ^ (seed * 0x9E3779B9u) ^ salt);
}

// Runs `c` and checks y: bit for bit for integer cases, else |y - ref| <= 1e-2 |ref| + 1e-5
// sum |terms| (the output's rounding, 2^-9 relative in bf16, plus fp32 accumulation); then y's
// row padding (still poisoned) and every guard byte. "" or the first fault.
std::string check(W4Case c, uint32_t seed, const W4Runner &run = run_on_cpu, double *worst = nullptr) {
    if (!c.ldx) c.ldx = c.k;
    if (!c.ldw) c.ldw = c.k / 8;
    if (!c.ldy) c.ldy = c.n;
    const int64_t groups = c.k / c.group;
    Guarded x(size_t(c.m * c.ldx) * 2, 0), w(size_t(c.n * c.ldw) * 4, 0), scales(size_t(c.n * groups) * 2),
        zeros(size_t(c.n * groups) * 2), bias(size_t(c.n) * 2), y(size_t(c.m * c.ldy) * 2);
    std::vector<double> xv(size_t(c.m * c.k)), uv(size_t(c.n * c.k)), sv(size_t(c.n * groups)),
        zv(size_t(c.n * groups), 8.0), bv(size_t(c.n), 0.0);
    // Row padding: inf in x and nibbles 15 in W, which would show in y if they were read.
    const uint16_t x_pad = c.x_dtype == SCHEDX_BF16 ? 0x7F80 : 0x7C00;
    for (int64_t i = 0; i < c.m; i++) {
        for (int64_t j = 0; j < c.ldx; j++) {
            const uint32_t r = hash(i, j, seed, 1);
            const double v = c.integer ? double(int(r % 7) - 3) : double(int(r % 20001) - 10000) / 2500.0;
            const uint16_t bits = j < c.k ? test::round_to_half(v, c.x_dtype) : x_pad;
            x.as<uint16_t>()[i * c.ldx + j] = bits;
            if (j < c.k) xv[size_t(i * c.k + j)] = test::half_value(bits, c.x_dtype);
        }
    }
    for (int64_t i = 0; i < c.n; i++) {
        for (int64_t j = 0; j < c.ldw; j++) {
            const uint32_t word = j < c.k / 8 ? hash(i, j, seed, 2) : 0xFFFFFFFFu;
            w.as<uint32_t>()[i * c.ldw + j] = word;
            for (int q = 0; q < 8 && j < c.k / 8; q++) uv[size_t(i * c.k + 8 * j + q)] = double((word >> (4 * q)) & 0xF);
        }
        for (int64_t g = 0; g < groups; g++) {
            const uint32_t r = hash(i, g, seed, 3);
            const double s = c.integer ? std::ldexp(1.0, int(r % 4) - 2) : (1.0 + double(r % 1000) / 1000.0) * 1e-2;
            const uint16_t sb = test::round_to_half(s, c.scales_dtype), zb = test::round_to_half(double(r % 17), c.scales_dtype);
            scales.as<uint16_t>()[i * groups + g] = sb;
            zeros.as<uint16_t>()[i * groups + g] = zb;
            sv[size_t(i * groups + g)] = test::half_value(sb, c.scales_dtype);
            if (c.zeros) zv[size_t(i * groups + g)] = test::half_value(zb, c.scales_dtype);
        }
        const uint16_t b = test::round_to_half(double(int(hash(i, 0, seed, 4) % 101) - 50), c.scales_dtype);
        bias.as<uint16_t>()[i] = b;
        if (c.bias) bv[size_t(i)] = test::half_value(b, c.scales_dtype);
    }
    W4Buffers buffers{&x, &w, &scales, &zeros, &bias, &y};
    const schedx_status st = run(c, buffers);
    if (st != SCHEDX_OK) {
        return "status " + std::to_string(st) + ": " + schedx_last_error() + (y.untouched() ? "" : " (and y was written)");
    }
    for (int64_t i = 0; i < c.m; i++) {
        for (int64_t j = 0; j < c.n; j++) {
            double sum = 0, sum_abs = 0;
            for (int64_t kk = 0; kk < c.k; kk++) {
                const size_t gi = size_t(j * groups + kk / c.group);
                const double t = xv[size_t(i * c.k + kk)] * (uv[size_t(j * c.k + kk)] - zv[gi]) * sv[gi];
                sum += t;
                sum_abs += std::fabs(t);
            }
            sum += bv[size_t(j)];
            const uint16_t got = y.as<uint16_t>()[i * c.ldy + j];
            const double gv = test::half_value(got, c.x_dtype);
            if (c.integer ? got != test::round_to_half(sum, c.x_dtype)
                          : !(std::fabs(gv - sum) <= 1e-2 * std::fabs(sum) + 1e-5 * sum_abs)) {
                return "at (" + std::to_string(i) + ", " + std::to_string(j) + "): want " + std::to_string(sum) +
                       " got " + std::to_string(gv);
            }
            if (worst && sum != 0) *worst = std::max(*worst, std::fabs(gv - sum) / std::fabs(sum));
        }
        for (int64_t j = c.n * 2; j < c.ldy * 2; j++) {
            if (y.data()[i * c.ldy * 2 + j] != test::kPoison) return "y padding written";
        }
    }
    for (Guarded *g : {&x, &w, &scales, &zeros, &bias, &y}) {
        if (!g->guards_intact()) return "guard bytes overwritten";
    }
    return "";
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
    CHECK(infos.size() == 7);
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
    CHECK(check({3, 8, 64}, 1).find("status 11") == 0);
    CHECK(schedx_force_variant("w4_linear", nullptr) == SCHEDX_OK);
    CHECK(check({3, 8, 64}, 1) == "");
    CHECK(schedx_last_variant("w4_linear") == std::string("w4_linear_bf16_sbf16_cpu_r4"));
    CHECK(check({4, 8, 64}, 1) == "");
    CHECK(schedx_last_variant("w4_linear") == std::string("w4_linear_bf16_sbf16_cpu_b4_r2"));
}

TEST_CASE("w4_linear: empty operands") {
    for (bool bias : {false, true}) {
        CAPTURE(bias);
        // K = 0: y is the bias (or 0), rounded to x's dtype.
        CHECK(check({3, 5, 0, 32, 0, 0, 0, SCHEDX_BF16, SCHEDX_BF16, false, bias}, 1) == "");
        CHECK(check({2, 9, 0, 128, 0, 0, 0, SCHEDX_FP16, SCHEDX_BF16, true, bias}, 1) == "");
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
