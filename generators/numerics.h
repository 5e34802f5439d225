// Bit-level number formats shared by the generators.
//
// Halide has no fp8 type and its bf16 arithmetic crashes the CUDA backend (see
// ../shared/HALIDE.md), so every format is handled as integer bit patterns here.
#pragma once

#include <cmath>
#include <cstring>

#include "Halide.h"

namespace schedx {

using Halide::Expr;

// Element types an input buffer may hold.
enum class ElemType { bf16, fp16, fp32 };

inline const std::map<std::string, ElemType> &elem_type_names() {
    static const std::map<std::string, ElemType> names{
        {"bf16", ElemType::bf16}, {"fp16", ElemType::fp16}, {"fp32", ElemType::fp32}};
    return names;
}

inline int elem_bits(ElemType t) { return t == ElemType::fp32 ? 32 : 16; }

inline Expr u32(uint32_t v) { return Halide::cast<uint32_t>(Halide::Expr(v)); }

inline Expr u64(uint64_t v) { return Halide::cast<uint64_t>(Halide::Expr(v)); }

inline uint32_t bits_of(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

// Float bits of p * 2^e2, rounded to nearest even as IEEE fp32 rounds (subnormals kept,
// overflow to inf). p: uint64 below 2^62; e2: int32. Integer only, so the GPU's ftz cannot
// touch it.
inline Expr float_bits_of(Expr p, Expr e2) {
    using namespace Halide;
    p = cast<uint64_t>(p);
    Expr msb = 63 - cast<int>(count_leading_zeros(p));
    Expr last = max(msb + e2 - 23, -149);  // binary exponent of the result's last mantissa bit
    Expr shift = last - e2;
    Expr s = cast<uint64_t>(clamp(shift, 1, 63));
    Expr q = p >> s, rem = p & ((u64(1) << s) - 1), half = u64(1) << (s - 1);
    Expr rounded = q + select(rem > half || (rem == half && (q & 1) == 1), u64(1), u64(0));
    Expr mant = select(shift > 0, rounded, p << cast<uint64_t>(clamp(-shift, 0, 63)));
    Expr bits = (cast<uint64_t>(last + 149) << 23) + mant;
    return select(p == 0, u32(0), cast<uint32_t>(min(bits, u64(0x7F800000))));
}

// The fp64 value of normal fp32 bits, built from the bits (a float-to-double conversion
// would flush nothing here, but the operands are built exactly either way).
inline Expr double_of_normal(Expr bits) {
    return Halide::reinterpret<double>((Halide::cast<uint64_t>(bits) << 29) + (u64(1023 - 127) << 52));
}

// fp32 bits of a positive normal fp64 value, correctly rounded (a double quotient of fp32
// operands rounds to fp32 without a double-rounding error: 53 >= 2 * 24 + 2).
inline Expr float_bits_of_double(Expr d) {
    Expr b = Halide::reinterpret<uint64_t>(d);
    Expr e = Halide::cast<int>((b >> 52) & u64(0x7FF));
    return float_bits_of((b & u64((uint64_t(1) << 52) - 1)) | u64(uint64_t(1) << 52), e - 1075);
}

// torchao's amax_to_scale, fp32(fp8_max / max(amax, 1e-12)) in fp64, from the bits of a
// non-negative amax (NaN propagates, inf gives 0): the quotient of exact operands, rounded
// to fp32 by integer code. Power-of-two scales mask the mantissa, which equals torchao's
// exp2(floor(log2(s))) except where its fp32 log2 rounds up to an integer (s within ~2^-21
// relative below a power of two: amax of fp32 inputs only).
inline Expr torchao_scale_bits(Expr amax, Expr is_e5m2, Expr pow2) {
    using namespace Halide;
    // The smallest float >= 1e-12: amax below it clamps to 1e-12 (a double).
    const float e = float(1e-12), first = double(e) >= 1e-12 ? e : std::nextafter(e, 1.0f);
    Expr fp8_max = select(is_e5m2, Expr(57344.0), Expr(448.0));
    Expr a = select(amax < u32(bits_of(first)), Expr(1e-12), double_of_normal(amax));
    Expr q = float_bits_of_double(strict_float(fp8_max / a));
    Expr s = select(amax > u32(0x7F800000), u32(0x7FC00000), amax == u32(0x7F800000), u32(0), q);
    return select(pow2 && s < u32(0x7F800000), s & u32(0xFF800000), s);  // a NaN scale stays NaN
}

// Bits (in the low 16 of a uint32) of a bf16 or fp16 value, or the bits of an fp32,
// to the float it denotes. Exact for every bit pattern.
inline Expr decode_to_float(Expr bits, ElemType t) {
    using namespace Halide;
    bits = cast<uint32_t>(bits);
    switch (t) {
    case ElemType::bf16:
        return reinterpret<float>(bits << 16);
    case ElemType::fp16: {
        Expr sign = (bits & u32(0x8000)) << 16;
        Expr e = (bits >> 10) & u32(0x1F);
        Expr m = bits & u32(0x3FF);
        Expr normal = ((e + u32(112)) << 23) | (m << 13);
        Expr inf_nan = u32(0x7F800000) | (m << 13);
        // Subnormal halves are m * 2^-24: exact in float.
        Expr sub = reinterpret<uint32_t>(cast<float>(m) * (1.0f / 16777216.0f));
        return reinterpret<float>(sign | select(e == 0, sub, e == 31, inf_nan, normal));
    }
    case ElemType::fp32:
        return reinterpret<float>(bits);
    }
    return Expr();
}

// fp8 formats, numbered as in the C ABI (schedx_fp8_format).
struct Fp8Format {
    uint32_t mant_bits;        // stored mantissa bits
    uint32_t rebias;           // (bias - 127) << 23, wrapped
    uint32_t max_bits;         // float bits of the largest finite value
    uint32_t min_normal_bits;  // float bits of the smallest normal value
    uint32_t denorm_bits;      // float bits of 2^(23 - (bias - 1 + mant_bits)): its ulp is the fp8 subnormal unit
};
constexpr Fp8Format kE4M3{3, uint32_t(7 - 127) << 23, 0x43E00000u /*448*/, 121u << 23, 141u << 23 /*2^14*/};
constexpr Fp8Format kE5M2{2, uint32_t(15 - 127) << 23, 0x47600000u /*57344*/, 113u << 23, 134u << 23 /*2^7*/};

// clamp(p, -max, max) encoded as fp8 (e4m3fn or e5m2 by is_e5m2: a constant folds the
// format away, a runtime flag keeps both), with round-to-nearest-even, subnormals and
// signed zero; NaN becomes 0x7F. Integer arithmetic but for one exact float add, so CPU
// and GPU give the same bits (a float-domain Veltkamp encoder differed under FMA).
inline Expr encode_fp8(Expr p, Expr is_e5m2) {
    using namespace Halide;
    auto pick = [&](uint32_t e5, uint32_t e4) { return select(is_e5m2, u32(e5), u32(e4)); };
    Expr mant_bits = pick(kE5M2.mant_bits, kE4M3.mant_bits);
    Expr u = reinterpret<uint32_t>(p);
    Expr sign = (u >> 24) & u32(0x80);
    Expr a = u & u32(0x7FFFFFFF);
    Expr is_nan = a > u32(0x7F800000);
    // Positive floats order like their bits: clamping the magnitude clamps the value.
    a = min(a, pick(kE5M2.max_bits, kE4M3.max_bits));

    Expr shift = u32(23) - mant_bits;
    Expr odd = (a >> shift) & u32(1);
    Expr normal = (a + pick(kE5M2.rebias, kE4M3.rebias) + ((u32(1) << (shift - 1)) - 1) + odd) >> shift;

    // Below the smallest normal, adding a power of two whose ulp is the fp8 subnormal unit
    // lets the FPU round (ties to even); the low bits of the sum are then the code.
    // A single add cannot be contracted into an FMA, and a flushed float denormal input
    // rounds to zero as it must.
    Expr denorm = pick(kE5M2.denorm_bits, kE4M3.denorm_bits);
    Expr sub = reinterpret<uint32_t>(reinterpret<float>(a) + reinterpret<float>(denorm)) - denorm;

    Expr mag = select(a < pick(kE5M2.min_normal_bits, kE4M3.min_normal_bits), sub, normal);
    return cast<uint8_t>(select(is_nan, u32(0x7F), mag | sign));
}

// bf16 or fp16 bits of a float holding an int8 value, which both formats represent
// exactly: no rounding step, so a shift for bf16 and a rebias for fp16 (a few
// instructions instead of float_to_half_bits' dozen). Not for other values.
inline Expr small_int_to_half_bits(Expr f, ElemType t) {
    using namespace Halide;
    Expr u = reinterpret<uint32_t>(f);
    if (t == ElemType::bf16) return u >> 16;
    Expr a = u & u32(0x7FFFFFFF);
    return ((u >> 16) & u32(0x8000)) | select(a == u32(0), u32(0), (a >> 13) - u32(112u << 10));
}

// Round-to-nearest-even float to bf16 or fp16 bits (in the low 16 of a uint32), as
// PyTorch's .to(): fp16 keeps subnormals and overflows to inf; NaN becomes 0x7FC0 (bf16)
// or sign|0x7E00 (fp16). Integer-only, so CPU and GPU give the same bits.
inline Expr float_to_half_bits(Expr f, ElemType t) {
    using namespace Halide;
    Expr u = reinterpret<uint32_t>(f);
    Expr a = u & u32(0x7FFFFFFF);
    Expr is_nan = a > u32(0x7F800000);
    if (t == ElemType::bf16) {
        return select(is_nan, u32(0x7FC0), (u + u32(0x7FFF) + ((u >> 16) & u32(1))) >> 16);
    }
    Expr sign = (u >> 16) & u32(0x8000);
    // Normal halves: rebias the exponent (127 -> 15) and round off 13 mantissa bits; a
    // carry rounds up into the exponent, and anything from 65520 up becomes inf.
    Expr normal = min((a - u32(112u << 23) + u32(0xFFF) + ((a >> 13) & u32(1))) >> 13, u32(0x7C00));
    // Subnormal halves are multiples of 2^-24: shift the full mantissa right, ties to even.
    Expr biased_exp = a >> 23;
    Expr mant = (a & u32(0x7FFFFF)) | select(biased_exp > 0, u32(0x800000), u32(0));
    Expr s = clamp(u32(126) - min(biased_exp, u32(126)), u32(1), u32(31));
    Expr q = mant >> s;
    Expr rem = mant & ((u32(1) << s) - 1);
    Expr half = u32(1) << (s - 1);
    Expr sub = q + select(rem > half || (rem == half && (q & 1) == 1), u32(1), u32(0));
    return select(is_nan, sign | u32(0x7E00), sign | select(a < u32(0x38800000), sub, normal));
}

// CUDA's byte permute: byte j of the result is byte sel[4j+3:4j] of {b, a} (a's bytes
// are 0-3, b's 4-7). One PRMT instruction; CUDA kernels only.
inline Halide::Expr prmt(Halide::Expr a, Halide::Expr b, Halide::Expr sel) {
    using namespace Halide;
    return Internal::Call::make(UInt(32), "llvm.nvvm.prmt", {a, b, cast<uint32_t>(sel)}, Internal::Call::PureExtern);
}

// prmt by shifts and masks, for targets without PRMT (the CPU builds of CUDA algorithms in
// tests): selector nibbles 0-7 only (no sign replication).
inline Halide::Expr prmt_by_shifts(Halide::Expr a, Halide::Expr b, Halide::Expr sel) {
    using namespace Halide;
    sel = cast<uint32_t>(sel);
    Expr out = u32(0);
    for (int j = 0; j < 4; j++) {
        Expr nibble = (sel >> (4 * j)) & u32(7);
        Expr from = select(nibble < 4, a, b) >> ((nibble & u32(3)) * 8);
        out = out | ((from & u32(0xFF)) << (8 * j));
    }
    return out;
}

// Byte b (0-3) of each of four words, w0's lowest: word y of the transpose of a 4 x 4 byte
// block (two pair permutes, then one of the pairs). PRMT on CUDA, shifts elsewhere.
inline Halide::Expr transposed_word(bool cuda, Halide::Expr w0, Halide::Expr w1, Halide::Expr w2, Halide::Expr w3,
                                    Halide::Expr b) {
    using namespace Halide;
    auto permute = [&](Expr lo, Expr hi, Expr sel) { return cuda ? prmt(lo, hi, sel) : prmt_by_shifts(lo, hi, sel); };
    b = cast<uint32_t>(b);
    Expr pair_sel = b | ((b + 4) << 4);  // byte b of the first word, then of the second
    return permute(permute(w0, w1, pair_sel), permute(w2, w3, pair_sel), u32(0x5410));
}

// Byte i (0..3) of a uint32 word, an int8, as a float, without an int-to-float
// instruction (those run at a fraction of the FMA rate on the GPU): the byte biased to
// unsigned becomes the low mantissa bits of 2^23, and the bias is subtracted. Exact.
// With `magic` (CUDA: 2^23's bits, 0x4B000000, as a value ptxas cannot fold) one PRMT
// builds the float; the shift-and-mask form cost ~3 integer instructions per weight,
// and the integer pipe (half the FMA rate) was the M = 1 GEMV's limit (ncu,
// bench/results/ncu_w8_2026-12-03_h200_52cbb5e.md). Without it, shifts and masks (CPU).
inline Expr int8_of_word_to_float(Expr word, Expr i, Expr magic) {
    using namespace Halide;
    Expr biased = word ^ u32(0x80808080);  // one xor serves the word's four bytes
    Expr bits;
    if (magic.defined()) {
        // Bytes 7, 6, 5 are magic's bytes 3, 2, 1 (0x4B, 0, 0); i is a's byte i.
        bits = prmt(biased, magic, u32(0x7650) | cast<uint32_t>(i));
    } else {
        bits = u32(0x4B000000) | ((biased >> (cast<uint32_t>(i) * 8)) & u32(0xFF));
    }
    return reinterpret<float>(bits) - 8388736.0f;  // 2^23 + 128
}

}  // namespace schedx
