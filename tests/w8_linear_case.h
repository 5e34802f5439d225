// One weight-only int8 linear call checked against an fp64 reference: integer-valued
// cases that must match bit for bit, random cases within a relative error bound, padded
// leading dimensions (whose padding would show in y if it were read), poisoned outputs
// and guard bytes. The `run` hook executes the call (on the CPU directly by default, or
// through device copies).
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <sstream>
#include <tuple>

#include "reference.h"
#include "test_util.h"

namespace test {

struct W8LinearCase {
    int64_t m, n, k;
    int64_t ldx = 0, ldw = 0, ldy = 0;  // 0: tight
    schedx_dtype x_dtype = SCHEDX_BF16, scales_dtype = SCHEDX_BF16;
    bool bias = false;
    bool integer = true;  // integer inputs, power-of-two scales: results must be exact
};

struct W8LinearResult {
    std::string error;   // "" on success
    double max_rel = 0;  // largest elementwise relative error (random cases)
};

// Host views of every argument; `run` may copy them to a device and back (y only needs
// to come back). A runner that checks guard bytes of its own copies reports a breach in
// `guard_error`.
struct W8LinearBuffers {
    Guarded *x, *w, *scales, *bias, *y;
    std::string guard_error;
};
using W8LinearRunner = std::function<schedx_status(const W8LinearCase &, W8LinearBuffers &)>;

inline schedx_status run_w8_linear_on_cpu(const W8LinearCase &c, W8LinearBuffers &b) {
    return schedx_w8_linear(b.x->data(), c.m, c.k, c.ldx, c.x_dtype, b.w->as<int8_t>(), c.n, c.ldw, b.scales->data(),
                            c.scales_dtype, c.bias ? b.bias->data() : nullptr, b.y->data(), c.ldy, SCHEDX_DEVICE_CPU,
                            nullptr);
}

// Finite fp16 values by code (0..0x7BFF): the fp16 reference rounds by nearest-value
// search, independent of the generators' bit arithmetic.
inline const std::vector<double> &fp16_values() {
    static const std::vector<double> v = [] {
        std::vector<double> out;
        for (uint32_t c = 0; c <= 0x7BFF; c++) out.push_back(ref::fp16_to_float(uint16_t(c)));
        return out;
    }();
    return v;
}

// Round-to-nearest-even of an exact value to the output dtype's bits.
inline uint16_t round_to_half(double v, schedx_dtype t) {
    if (t == SCHEDX_BF16) {
        // Exact integers and small dyadic values fit a float; float_to_bf16 rounds by bits.
        return ref::float_to_bf16(float(v));
    }
    const std::vector<double> &vals = fp16_values();
    const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
    const double a = std::fabs(v);
    if (a >= 65520.0) return sign | 0x7C00;
    auto hi = std::lower_bound(vals.begin(), vals.end(), a);
    if (hi == vals.end()) return sign | 0x7BFF;  // (65504, 65520): down to the largest finite
    uint32_t code = uint32_t(hi - vals.begin());
    if (*hi != a && code > 0) {
        const double d_hi = *hi - a, d_lo = a - vals[code - 1];
        if (d_lo < d_hi || (d_lo == d_hi && ((code - 1) & 1) == 0)) code -= 1;
    }
    return uint16_t(code) | sign;
}

inline double half_value(uint16_t bits, schedx_dtype t) {
    return t == SCHEDX_BF16 ? ref::bf16_to_float(bits) : ref::fp16_to_float(bits);
}

// Inputs are pure functions of their coordinates and the seed, so each matrix and the
// fp64 products are made once per process (not thread-safe) and shared by every call
// with the same key: for large shapes run on many variants the reference dominates the
// run time otherwise.
inline uint32_t w8_hash(int64_t a, int64_t b, uint32_t seed, uint32_t salt) {
    return mix(uint32_t(a * 7919 + b) ^ (seed * 0x9E3779B9u) ^ salt);
}

// Integer x lies in [-3, 3] (exact in bf16 and fp16, so its products do not depend on the
// dtype); random x in [-4, 4] rounded to the dtype.
inline const std::vector<uint16_t> &w8_x_bits(int64_t m, int64_t k, schedx_dtype xt, bool integer, uint32_t seed) {
    static std::map<std::tuple<int64_t, int64_t, schedx_dtype, bool, uint32_t>, std::vector<uint16_t>> cache;
    std::vector<uint16_t> &x = cache[{m, k, xt, integer, seed}];
    if (x.empty()) {
        for (int64_t i = 0; i < m; i++) {
            for (int64_t j = 0; j < k; j++) {
                const uint32_t r = w8_hash(i, j, seed, 1);
                x.push_back(round_to_half(integer ? double(int(r % 7) - 3) : double(int(r % 20001) - 10000) / 2500.0, xt));
            }
        }
    }
    return x;
}

inline const std::vector<int8_t> &w8_w_values(int64_t n, int64_t k, uint32_t seed) {
    static std::map<std::tuple<int64_t, int64_t, uint32_t>, std::vector<int8_t>> cache;
    std::vector<int8_t> &w = cache[{n, k, seed}];
    if (w.empty()) {
        for (int64_t i = 0; i < n; i++) {
            for (int64_t j = 0; j < k; j++) w.push_back(int8_t(int(w8_hash(i, j, seed, 2) % 255) - 127));
        }
    }
    return w;
}

// sum_k x[i][k] * W[j][k] in fp64 (exact for integer inputs).
inline const std::vector<double> &w8_products(int64_t m, int64_t n, int64_t k, schedx_dtype xt, bool integer,
                                              uint32_t seed) {
    static std::map<std::tuple<int64_t, int64_t, int64_t, schedx_dtype, bool, uint32_t>, std::vector<double>> cache;
    std::vector<double> &out = cache[{m, n, k, integer ? SCHEDX_BF16 : xt, integer, seed}];
    if (out.empty()) {
        const std::vector<uint16_t> &xb = w8_x_bits(m, k, xt, integer, seed);
        const std::vector<int8_t> &w = w8_w_values(n, k, seed);
        std::vector<double> xv(xb.size());
        for (size_t i = 0; i < xb.size(); i++) xv[i] = half_value(xb[i], xt);
        out.resize(size_t(m) * n);
        for (int64_t i = 0; i < m; i++) {
            for (int64_t j = 0; j < n; j++) {
                const double *xr = &xv[i * k];
                const int8_t *wr = &w[j * k];
                // Four independent sums: the loop is latency-bound on one.
                double s[4] = {0, 0, 0, 0};
                int64_t q = 0;
                for (; q + 4 <= k; q += 4) {
                    for (int t = 0; t < 4; t++) s[t] += xr[q + t] * wr[q + t];
                }
                for (; q < k; q++) s[0] += xr[q] * wr[q];
                out[i * n + j] = (s[0] + s[1]) + (s[2] + s[3]);
            }
        }
    }
    return out;
}

// Runs `c` on the inputs of `seed` and checks y element by element: bit for bit for
// integer cases, else within 1e-2 relative error (floored at 1e-3 of the output's range);
// then y's row padding (still poisoned) and every guard byte.
inline W8LinearResult check_w8_linear(W8LinearCase c, uint32_t seed,
                                      const W8LinearRunner &run = run_w8_linear_on_cpu) {
    if (!c.ldx) c.ldx = c.k;
    if (!c.ldw) c.ldw = c.k;
    if (!c.ldy) c.ldy = c.n;
    const int sb = c.scales_dtype == SCHEDX_FP32 ? 4 : 2;
    Guarded x(size_t(c.m) * c.ldx * 2, 0), w(size_t(c.n) * c.ldw, 0), scales(size_t(c.n) * sb),
        bias(size_t(c.n) * sb), y(size_t(c.m) * c.ldy * 2);
    const std::vector<uint16_t> &xb = w8_x_bits(c.m, c.k, c.x_dtype, c.integer, seed);
    const std::vector<int8_t> &wv = w8_w_values(c.n, c.k, seed);
    // Row padding holds inf in x and 127 in W, which would show in y if it were read.
    const uint16_t x_pad = c.x_dtype == SCHEDX_BF16 ? 0x7F80 : 0x7C00;
    for (int64_t i = 0; i < c.m; i++) {
        uint16_t *row = x.as<uint16_t>() + i * c.ldx;
        std::copy(xb.begin() + i * c.k, xb.begin() + (i + 1) * c.k, row);
        std::fill(row + c.k, row + c.ldx, x_pad);
    }
    for (int64_t i = 0; i < c.n; i++) {
        int8_t *row = w.as<int8_t>() + i * c.ldw;
        std::copy(wv.begin() + i * c.k, wv.begin() + (i + 1) * c.k, row);
        std::fill(row + c.k, row + c.ldw, int8_t(127));
    }
    std::vector<double> sv(c.n), bv(c.n, 0.0);
    for (int64_t i = 0; i < c.n; i++) {
        const uint32_t r = w8_hash(i, 0, seed, 3);
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

    W8LinearResult res;
    std::ostringstream err;
    W8LinearBuffers buffers{&x, &w, &scales, &bias, &y, ""};
    const schedx_status st = run(c, buffers);
    if (st != SCHEDX_OK) {
        err << "status " << st << ": " << schedx_last_error();
        if (!y.untouched()) err << " (and y was written)";  // a refused call writes nothing
        res.error = err.str();
        return res;
    }

    const std::vector<double> &dot = w8_products(c.m, c.n, c.k, c.x_dtype, c.integer, seed);
    double max_abs = 0;
    for (int64_t j = 0; j < c.m * c.n; j++) max_abs = std::max(max_abs, std::fabs(dot[j] * sv[j % c.n] + bv[j % c.n]));
    for (int64_t i = 0; i < c.m; i++) {
        for (int64_t j = 0; j < c.n; j++) {
            uint16_t got;
            std::memcpy(&got, y.data() + (i * c.ldy + j) * 2, 2);
            const double ref_v = dot[i * c.n + j] * sv[j] + bv[j];
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
            if (y.data()[i * c.ldy * 2 + j] != kPoison) {
                res.error = "y padding written";
                return res;
            }
        }
    }
    for (Guarded *g : {&x, &w, &scales, &bias, &y}) {
        if (!g->guards_intact()) res.error = "guard bytes overwritten";
    }
    if (!buffers.guard_error.empty()) res.error = buffers.guard_error;
    return res;
}

}  // namespace test
