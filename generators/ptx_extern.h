// PTX instructions Halide 21 cannot emit (its CUDA target stops at PTX 7.1 / sm_86), as
// extern calls that the runtime rewrites into the instruction when it loads the module
// (runtime/ptx_rewrite.cpp holds the table of bodies; a name missing there fails the load).
// CUDA kernels only. A pipeline using them needs the device capability its variant's
// min_sm names in variants.json: dispatch skips it on older devices.
#pragma once

#include "Halide.h"

namespace schedx {

// Two floats to a pair of fp8 codes by cvt.rn.satfinite.{e4m3,e5m2}x2.f32 (sm_89): round
// to nearest even, finite values beyond the largest saturate to it, NaN is 0x7F. `lo`'s
// code is the low byte.
inline Halide::Expr ptx_cvt_fp8x2(Halide::Expr lo, Halide::Expr hi, bool e5m2) {
    using namespace Halide;
    return Internal::Call::make(UInt(16), e5m2 ? "schedx_ptx_cvt_e5m2x2" : "schedx_ptx_cvt_e4m3x2",
                                {cast<float>(lo), cast<float>(hi)}, Internal::Call::PureExtern);
}

// `loaded` itself; the global load that produced it is issued with
// .L1::no_allocate.L2::evict_first (data read once: it leaves L1 alone and goes first
// from L2). The value must come straight from a load of global memory, else the module
// fails to load.
inline Halide::Expr ptx_evict_first(Halide::Expr loaded) {
    using namespace Halide;
    return Internal::Call::make(UInt(32), "schedx_ptx_evict_first", {cast<uint32_t>(loaded)},
                                Internal::Call::PureExtern);
}

// D = A * B + C on a warp's 16 x 8 x 16 tile by mma.sync.aligned.m16n8k16.row.col.f32
// .{bf16,f16} (sm_80): `a` the lane's four A fragment words, `b` its two B words (two
// elements each, the lower k in the low half), `c` its four fp32 accumulators; D's four
// floats. One call per float (Halide scalarizes vector-typed calls), all with
// the same operands, which the rewrite issues as one mma: keep them in one basic block.
inline std::vector<Halide::Expr> ptx_mma_m16n8k16(const std::vector<Halide::Expr> &a, const std::vector<Halide::Expr> &b,
                                                   const std::vector<Halide::Expr> &c, bool fp16) {
    using namespace Halide;
    std::vector<Expr> operands;
    for (const Expr &e : a) operands.push_back(cast<uint32_t>(e));
    for (const Expr &e : b) operands.push_back(cast<uint32_t>(e));
    for (const Expr &e : c) operands.push_back(cast<float>(e));
    const std::string name = fp16 ? "schedx_ptx_mma_m16n8k16_f16_d" : "schedx_ptx_mma_m16n8k16_bf16_d";
    std::vector<Expr> d;
    for (int part = 0; part < 4; part++) {
        d.push_back(Internal::Call::make(Float(32), name + std::to_string(part), operands, Internal::Call::PureExtern));
    }
    return d;
}

}  // namespace schedx
