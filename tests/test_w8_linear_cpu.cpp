// CPU variants of the weight-only int8 linear against an fp64 reference: integer-valued
// cases that must match bit for bit, random cases within a relative error bound, edge
// shapes, padded leading dimensions, poisoned outputs and guard bytes.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "reference.h"
#include "test_util.h"

using test::Guarded;

namespace {

// Finite fp16 values by code (0..0x7BFF): the fp16 reference rounds by nearest-value
// search, independent of the generators' bit arithmetic.
const std::vector<double> &fp16_values() {
    static std::vector<double> v = [] {
        std::vector<double> out;
        for (uint32_t c = 0; c <= 0x7BFF; c++) out.push_back(ref::fp16_to_float(uint16_t(c)));
        return out;
    }();
    return v;
}

// Round-to-nearest-even of an exact value to the output dtype's bits.
uint16_t round_to_half(double v, schedx_dtype t) {
    if (t == SCHEDX_BF16) {
        // Exact integers and small dyadic values fit a float; float_to_bf16 rounds by bits.
        return ref::float_to_bf16(float(v));
    }
    const std::vector<double> &vals = fp16_values();
    const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
    const double a = std::fabs(v);
    if (a >= 65520.0) return sign | 0x7C00;
    auto hi = std::lower_bound(vals.begin(), vals.end(), a);
    uint32_t code = uint32_t(hi - vals.begin());
    if (*hi != a && code > 0) {
        const double d_hi = *hi - a, d_lo = a - vals[code - 1];
        if (d_lo < d_hi || (d_lo == d_hi && ((code - 1) & 1) == 0)) code -= 1;
    }
    return uint16_t(code) | sign;
}

double half_value(uint16_t bits, schedx_dtype t) {
    return t == SCHEDX_BF16 ? ref::bf16_to_float(bits) : ref::fp16_to_float(bits);
}

struct W8Case {
    int64_t m, n, k;
    int64_t ldx = 0, ldw = 0, ldy = 0;  // 0: tight
    schedx_dtype x_dtype = SCHEDX_BF16, scales_dtype = SCHEDX_BF16;
    bool bias = false;
    bool integer = true;  // integer inputs, power-of-two scales: results must be exact
};

struct W8Result {
    std::string error;   // "" on success
    double max_rel = 0;  // largest elementwise relative error (random cases)
};

W8Result check_w8(W8Case c, uint32_t seed) {
    if (!c.ldx) c.ldx = c.k;
    if (!c.ldw) c.ldw = c.k;
    if (!c.ldy) c.ldy = c.n;
    const int sb = c.scales_dtype == SCHEDX_FP32 ? 4 : 2;
    Guarded x(size_t(c.m) * c.ldx * 2, 0), w(size_t(c.n) * c.ldw, 0), scales(size_t(c.n) * sb),
        bias(size_t(c.n) * sb), y(size_t(c.m) * c.ldy * 2);
    auto h = [&](int64_t a, int64_t b, uint32_t salt) { return test::mix(uint32_t(a * 7919 + b) ^ (seed * 0x9E3779B9u) ^ salt); };
    std::vector<double> xv(size_t(c.m) * c.k), wv(size_t(c.n) * c.k), sv(c.n), bv(c.n, 0.0);
    const uint16_t x_pad = c.x_dtype == SCHEDX_BF16 ? 0x7F80 : 0x7C00;  // inf: shows if padding is read
    for (int64_t i = 0; i < c.m; i++) {
        for (int64_t j = 0; j < c.ldx; j++) {
            uint16_t bits = x_pad;
            if (j < c.k) {
                const uint32_t r = h(i, j, 1);
                const double val = c.integer ? double(int(r % 7) - 3) : (double(int(r % 20001) - 10000) / 2500.0);
                bits = round_to_half(val, c.x_dtype);
                xv[i * c.k + j] = half_value(bits, c.x_dtype);
            }
            std::memcpy(x.data() + (i * c.ldx + j) * 2, &bits, 2);
        }
    }
    for (int64_t i = 0; i < c.n; i++) {
        for (int64_t j = 0; j < c.ldw; j++) {
            const int8_t q = j < c.k ? int8_t(int(h(i, j, 2) % 255) - 127) : int8_t(127);
            w.as<int8_t>()[i * c.ldw + j] = q;
            if (j < c.k) wv[i * c.k + j] = q;
        }
        const uint32_t r = h(i, 0, 3);
        double s = c.integer ? std::ldexp(1.0, int(r % 4) - 2) : (1.0 + double(r % 1000) / 1000.0) * 1e-2;
        double b = c.integer ? double(int(r % 101) - 50) : double(int(r % 2001) - 1000) / 100.0;
        if (c.scales_dtype == SCHEDX_BF16) {
            const uint16_t sbits = ref::float_to_bf16(float(s)), bbits = ref::float_to_bf16(float(b));
            std::memcpy(scales.data() + i * 2, &sbits, 2);
            std::memcpy(bias.data() + i * 2, &bbits, 2);
            s = ref::bf16_to_float(sbits);
            b = ref::bf16_to_float(bbits);
        } else {
            const float sf = float(s), bf = float(b);
            std::memcpy(scales.data() + i * 4, &sf, 4);
            std::memcpy(bias.data() + i * 4, &bf, 4);
            s = sf;
            b = bf;
        }
        sv[i] = s;
        if (c.bias) bv[i] = b;
    }
    W8Result res;
    const schedx_status st = schedx_w8_linear(x.data(), c.m, c.k, c.ldx, c.x_dtype, w.as<int8_t>(), c.n, c.ldw,
                                              scales.data(), c.scales_dtype, c.bias ? bias.data() : nullptr, y.data(),
                                              c.ldy, SCHEDX_DEVICE_CPU, nullptr);
    std::ostringstream err;
    if (st != SCHEDX_OK) {
        err << "status " << st << ": " << schedx_last_error();
        res.error = err.str();
        return res;
    }
    std::vector<double> want(size_t(c.m) * c.n);
    double max_abs = 0;
    for (int64_t i = 0; i < c.m; i++) {
        for (int64_t j = 0; j < c.n; j++) {
            double acc = 0;
            for (int64_t q = 0; q < c.k; q++) acc += xv[i * c.k + q] * wv[j * c.k + q];
            want[i * c.n + j] = acc * sv[j] + bv[j];
            max_abs = std::max(max_abs, std::fabs(want[i * c.n + j]));
        }
    }
    for (int64_t i = 0; i < c.m; i++) {
        for (int64_t j = 0; j < c.n; j++) {
            uint16_t got;
            std::memcpy(&got, y.data() + (i * c.ldy + j) * 2, 2);
            const double ref_v = want[i * c.n + j];
            if (c.integer) {
                const uint16_t exact = round_to_half(ref_v, c.x_dtype);
                if (got != exact) {
                    err << "at (" << i << ", " << j << "): want 0x" << std::hex << exact << " (" << ref_v << ") got 0x"
                        << got << std::dec << " (" << half_value(got, c.x_dtype) << ")";
                    res.error = err.str();
                    return res;
                }
            } else {
                // Relative to the element, floored at 1e-3 of the output's range so that
                // outputs near zero (cancellation) do not dominate.
                const double rel =
                    std::fabs(half_value(got, c.x_dtype) - ref_v) / std::max(std::fabs(ref_v), 1e-3 * max_abs);
                if (!(rel <= 1e-2)) {
                    err << "at (" << i << ", " << j << "): want " << ref_v << " got " << half_value(got, c.x_dtype)
                        << " relative error " << rel;
                    res.error = err.str();
                    return res;
                }
                res.max_rel = std::max(res.max_rel, rel);
            }
        }
        for (int64_t j = c.n * 2; j < c.ldy * 2; j++) {
            if (y.data()[i * c.ldy * 2 + j] != test::kPoison) {
                res.error = "y padding written";
                return res;
            }
        }
    }
    for (Guarded *g : {&x, &w, &scales, &bias, &y}) {
        if (!g->guards_intact()) res.error = "guard bytes overwritten";
    }
    return res;
}

const schedx_dtype kXTypes[] = {SCHEDX_BF16, SCHEDX_FP16};
const schedx_dtype kScaleTypes[] = {SCHEDX_BF16, SCHEDX_FP32};

}  // namespace

TEST_CASE("w8_linear: integer inputs match exactly, edge shapes, bias on and off") {
    struct Shape {
        int64_t n, k, ldx, ldw, ldy;
    };
    const Shape shapes[] = {{1, 1, 0, 0, 0},     {1, 37, 0, 0, 0},   {33, 100, 0, 0, 0},
                            {64, 256, 0, 0, 0},  {7, 45, 50, 48, 9}, {40, 300, 301, 333, 41}};
    uint32_t seed = 1;
    for (schedx_dtype xt : kXTypes) {
        for (schedx_dtype st : kScaleTypes) {
            for (bool bias : {false, true}) {
                for (int64_t m : {1, 2, 3, 5, 16, 17}) {
                    for (const Shape &s : shapes) {
                        CAPTURE(xt);
                        CAPTURE(st);
                        CAPTURE(bias);
                        CAPTURE(m);
                        CAPTURE(s.n);
                        CAPTURE(s.k);
                        W8Case c{m, s.n, s.k, s.ldx, s.ldw, s.ldy, xt, st, bias, true};
                        CHECK(check_w8(c, seed++).error == "");
                    }
                }
            }
        }
    }
}

TEST_CASE("w8_linear: random inputs within 1e-2 of an fp64 reference") {
    double worst = 0;
    uint32_t seed = 100;
    for (schedx_dtype xt : kXTypes) {
        for (schedx_dtype st : kScaleTypes) {
            for (bool bias : {false, true}) {
                for (int64_t m : {1, 2, 3, 5, 16, 17}) {
                    for (auto nk : {std::pair<int64_t, int64_t>{1, 1000}, {40, 37}, {129, 300}, {16, 4096}}) {
                        CAPTURE(xt);
                        CAPTURE(st);
                        CAPTURE(bias);
                        CAPTURE(m);
                        CAPTURE(nk.first);
                        CAPTURE(nk.second);
                        W8Case c{m, nk.first, nk.second, 0, 0, 0, xt, st, bias, false};
                        const W8Result r = check_w8(c, seed++);
                        CHECK(r.error == "");
                        worst = std::max(worst, r.max_rel);
                    }
                }
            }
        }
    }
    MESSAGE("w8_linear CPU: largest elementwise relative error against fp64: " << worst);
    CHECK(worst <= 1e-2);
}

TEST_CASE("w8_linear: every CPU variant, forced") {
    const std::vector<std::string> names = test::variants_of("w8_linear", "cpu");
    CHECK(names.size() == 8);
    for (int i = 0; i < schedx_variant_count(); i++) {
        schedx_variant_info info;
        REQUIRE(schedx_get_variant(i, &info) == SCHEDX_OK);
        if (std::string(info.op) != "w8_linear" || std::string(info.device) != "cpu") continue;
        const std::string p = std::string(" ") + info.params + " ";
        W8Case c{5, 33, 100, 0, 0, 40};
        c.x_dtype = p.find(" x_type=fp16 ") != std::string::npos ? SCHEDX_FP16 : SCHEDX_BF16;
        c.scales_dtype = p.find(" scale_type=fp32 ") != std::string::npos ? SCHEDX_FP32 : SCHEDX_BF16;
        c.bias = p.find(" with_bias=true ") != std::string::npos;
        CAPTURE(info.name);
        REQUIRE(schedx_force_variant("w8_linear", info.name) == SCHEDX_OK);
        CHECK(check_w8(c, 7).error == "");
        CHECK(schedx_last_variant("w8_linear") == std::string(info.name));
        CHECK(schedx_last_reason("w8_linear") == std::string("forced"));
        // A variant of another dtype or bias setting does not serve the call.
        W8Case other = c;
        other.bias = !c.bias;
        CHECK(check_w8(other, 7).error.find("status 11") == 0);
    }
    CHECK(schedx_force_variant("w8_linear", nullptr) == SCHEDX_OK);
    CHECK(check_w8({2, 3, 4}, 1).error == "");
    CHECK(schedx_last_variant("w8_linear") == std::string("w8_linear_bf16_sbf16_cpu"));
}

TEST_CASE("w8_linear: argument checks give distinct statuses") {
    Guarded x(64 * 2), w(64), s(16 * 4), y(64 * 2);
    auto call = [&](const void *xp, int64_t m, int64_t k, int64_t ldx, schedx_dtype xt, const void *wp, int64_t n,
                    int64_t ldw, const void *sp, schedx_dtype st, const void *bp, void *yp, int64_t ldy,
                    int device = SCHEDX_DEVICE_CPU) {
        return schedx_w8_linear(xp, m, k, ldx, xt, static_cast<const int8_t *>(wp), n, ldw, sp, st, bp, yp, ldy,
                                schedx_device(device), nullptr);
    };
    const auto B = SCHEDX_BF16;
    CHECK(call(x.data(), 2, 8, 8, B, w.data(), 4, 8, s.data(), B, nullptr, y.data(), 4) == SCHEDX_OK);
    CHECK(call(nullptr, 2, 8, 8, B, w.data(), 4, 8, s.data(), B, nullptr, y.data(), 4) == SCHEDX_ERR_NULL_POINTER);
    CHECK(call(x.data(), 2, 8, 8, B, nullptr, 4, 8, s.data(), B, nullptr, y.data(), 4) == SCHEDX_ERR_NULL_POINTER);
    CHECK(call(x.data(), 2, 8, 8, B, w.data(), 4, 8, nullptr, B, nullptr, y.data(), 4) == SCHEDX_ERR_NULL_POINTER);
    CHECK(call(x.data(), 2, 8, 8, B, w.data(), 4, 8, s.data(), B, nullptr, nullptr, 4) == SCHEDX_ERR_NULL_POINTER);
    CHECK(call(x.data(), 0, 8, 8, B, w.data(), 4, 8, s.data(), B, nullptr, y.data(), 4) == SCHEDX_ERR_BAD_SIZE);
    CHECK(call(x.data(), 2, -1, 8, B, w.data(), 4, 8, s.data(), B, nullptr, y.data(), 4) == SCHEDX_ERR_BAD_SIZE);
    CHECK(call(x.data(), 2, 8, 8, B, w.data(), 0, 8, s.data(), B, nullptr, y.data(), 4) == SCHEDX_ERR_BAD_SIZE);
    CHECK(call(x.data(), 2, 8, 7, B, w.data(), 4, 8, s.data(), B, nullptr, y.data(), 4) == SCHEDX_ERR_BAD_LEADING_DIM);
    CHECK(call(x.data(), 2, 8, 8, B, w.data(), 4, 7, s.data(), B, nullptr, y.data(), 4) == SCHEDX_ERR_BAD_LEADING_DIM);
    CHECK(call(x.data(), 2, 8, 8, B, w.data(), 4, 8, s.data(), B, nullptr, y.data(), 3) == SCHEDX_ERR_BAD_LEADING_DIM);
    CHECK(call(x.data(), 2, 8, 8, SCHEDX_FP32, w.data(), 4, 8, s.data(), B, nullptr, y.data(), 4) ==
          SCHEDX_ERR_UNSUPPORTED_DTYPE);
    CHECK(call(x.data(), 2, 8, 8, B, w.data(), 4, 8, s.data(), SCHEDX_FP16, nullptr, y.data(), 4) ==
          SCHEDX_ERR_UNSUPPORTED_DTYPE);
    CHECK(call(x.data(), 2, 8, 8, B, w.data(), 4, 8, s.data(), B, nullptr, y.data(), 4, 9) == SCHEDX_ERR_BAD_DEVICE);
    // y over x, y over the bias.
    CHECK(call(x.data(), 2, 8, 8, B, w.data(), 4, 8, s.data(), B, nullptr, x.data() + 2, 4) == SCHEDX_ERR_OVERLAP);
    CHECK(call(x.data(), 2, 8, 8, B, w.data(), 4, 8, s.data(), B, y.data() + 4, y.data(), 4) == SCHEDX_ERR_OVERLAP);
    CHECK(call(x.data(), 2, 8, int64_t(1) << 62, B, w.data(), 4, 8, s.data(), B, nullptr, y.data(), 4) ==
          SCHEDX_ERR_SIZE_OVERFLOW);
    CHECK(call(x.data(), 2, 8, 8, B, w.data(), 4, int64_t(1) << 40, s.data(), B, nullptr, y.data(), 4) ==
          SCHEDX_ERR_SIZE_OVERFLOW);
    CHECK(std::string(schedx_last_error()).find("w") == 0);
}
