// Independent references for the tests: fp8 by nearest-value search over a decoded
// table (not the generators' bit arithmetic), half formats by their definitions.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace ref {

inline float bits_to_float(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline uint32_t float_to_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
inline float bf16_to_float(uint16_t b) { return bits_to_float(uint32_t(b) << 16); }
inline float fp16_to_float(uint16_t h) {
    const int e = (h >> 10) & 31, m = h & 1023;
    const float sign = (h & 0x8000) ? -1.0f : 1.0f;
    if (e == 31) return m ? std::nanf("") : sign * INFINITY;
    if (e == 0) return sign * std::ldexp(float(m), -24);
    return sign * std::ldexp(1.0f + m / 1024.0f, e - 15);
}
// Round-to-nearest-even float to bf16 (for making test inputs).
inline uint16_t float_to_bf16(float f) {
    uint32_t u = float_to_bits(f);
    if (std::isnan(f)) return 0x7FC0;
    return uint16_t((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

// Decoded non-negative finite values of an fp8 format, indexed by code.
struct Fp8Table {
    int mant_bits, bias, max_code;
    float max_value;
    std::vector<double> values;
    Fp8Table(int m, int b, int max_c) : mant_bits(m), bias(b), max_code(max_c) {
        for (int c = 0; c <= max_code; c++) {
            const int e = c >> m, f = c & ((1 << m) - 1);
            values.push_back(e == 0 ? std::ldexp(double(f), 1 - b - m) : std::ldexp(1.0 + double(f) / (1 << m), e - b));
        }
        max_value = float(values.back());
    }
};
inline const Fp8Table &e4m3fn() {
    static Fp8Table t(3, 7, 0x7E);
    return t;
}
inline const Fp8Table &e5m2() {
    static Fp8Table t(2, 15, 0x7B);
    return t;
}

// PyTorch's clamp(v, -max, max).to(fp8): nearest value, ties to the even code; NaN 0x7F.
inline uint8_t encode(float v, const Fp8Table &t) {
    if (std::isnan(v)) return 0x7F;
    const uint8_t sign = std::signbit(v) ? 0x80 : 0;
    const double a = std::min(double(std::fabs(v)), double(t.max_value));
    auto hi = std::lower_bound(t.values.begin(), t.values.end(), a);
    int code = int(hi - t.values.begin());
    if (*hi != a && code > 0) {
        const double d_hi = *hi - a, d_lo = a - t.values[code - 1];
        if (d_lo < d_hi || (d_lo == d_hi && ((code - 1) & 1) == 0)) code -= 1;
    }
    return uint8_t(code) | sign;
}

// torchao's tensorwise amax_to_scale: fp32(fp8_max / max(amax, 1e-12)) in fp64, NaN kept,
// and _round_scale_down_to_power_of_2 (exp2(floor(log2(s)))) when pow2.
inline float torchao_scale(double fp8_max, float amax, bool pow2) {
    const double a = std::isnan(amax) ? double(amax) : std::max(double(amax), 1e-12);
    const float s = float(fp8_max / a);
    return pow2 ? std::exp2(std::floor(std::log2(s))) : s;
}

}  // namespace ref
