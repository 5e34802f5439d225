// The recipes' scale rules as the reference libraries compute them, in float arithmetic:
// TE's compute_scale_from_amax (its CUDA kernels, no ftz) and torchao's E8M0 rules. Shared by
// the tests (quantize_fp8_case.h) and schedx-explore's check; independent of the generator's
// integer emulation of them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "reference.h"
#include "schedx/schedx.h"

namespace test {

namespace qref {

inline float decode(schedx_dtype t, uint32_t bits) {
    switch (t) {
    case SCHEDX_BF16: return ref::bf16_to_float(uint16_t(bits));
    case SCHEDX_FP16: return ref::fp16_to_float(uint16_t(bits));
    default: return ref::bits_to_float(bits);
    }
}

inline float max_finite(schedx_dtype t) {
    return t == SCHEDX_BF16 ? ref::bits_to_float(0x7F7F0000) : t == SCHEDX_FP16 ? 65504.0f : 3.40282347e38f;
}

// TE's compute_scale_from_amax as its kernels run it (IEEE float, no ftz).
inline float te_scale(float amax, const schedx_quantize_fp8_options &o, schedx_dtype t) {
    const float fp8_max = o.format == SCHEDX_E5M2 ? 57344.0f : 448.0f;
    if (amax < o.epsilon) amax = o.epsilon;
    if (std::isinf(amax) || amax == 0.0f || std::isnan(amax)) return 1.0f;
    float s = fp8_max / amax;
    if (std::isinf(s)) s = max_finite(t);
    if (o.pow2_scales) s = ref::bits_to_float(ref::float_to_bits(s) & 0xFF800000u);
    return s;
}

// torchao's E8M0 byte of a block: to_mx FLOOR (inf by its exponent field), _to_mx_rceil
// RCEIL with the exact round-up (TE, sm_100's cvt.rp), 254 for inf; 255 for NaN.
inline uint8_t mx_byte(float amax, const schedx_quantize_fp8_options &o) {
    if (std::isnan(amax)) return 255;
    const bool e5 = o.format == SCHEDX_E5M2;
    if (o.mx_mode == SCHEDX_MX_FLOOR) {
        const int unbiased = int((ref::float_to_bits(amax) >> 23) & 0xFF) - 127 - (e5 ? 15 : 8);
        return uint8_t(std::min(std::max(unbiased, -127), 128) + 127);
    }
    if (std::isinf(amax)) return 254;
    const float descale = amax * (1.0f / (e5 ? 57344.0f : 448.0f));
    const uint32_t d = ref::float_to_bits(descale);
    const uint32_t e = (d >> 23) & 0xFF, mant = d & 0x7FFFFF;
    return uint8_t(e + (e == 0 ? (mant > 0x400000) : (mant != 0)));
}

// x as torchao scales it by the block's byte, before the fp8 cast: to_mx divides by the
// scale 2^(byte - 127) clamped to the smallest normal float (byte 255: inf); _to_mx_rceil
// multiplies by 2^(127 - byte), by 1 at byte 0, 2^-127 at 254, NaN at 255.
inline float mx_scaled(float x, uint8_t byte, const schedx_quantize_fp8_options &o) {
    if (o.mx_mode == SCHEDX_MX_FLOOR) {
        const float scale = std::max(ref::bits_to_float(uint32_t(byte) << 23), 0x1p-126f);
        return x / scale;
    }
    if (byte == 255) return NAN;
    return x * (byte == 0 ? 1.0f : byte == 254 ? 0x1p-127f : std::ldexp(1.0f, 127 - int(byte)));
}

// torchao's amax_to_scale (fp64 quotient, fp32 result) and _round_scale_down_to_power_of_2.
inline float axis_scale(float amax, const schedx_quantize_fp8_options &o) {
    return ref::torchao_scale(o.format == SCHEDX_E5M2 ? 57344.0 : 448.0, amax, o.pow2_scales);
}

}  // namespace qref

}  // namespace test
