// Atomic read-modify-write on a device address, for CUDA kernels only.
//
// Halide's atomic() lowers every update but an add to a compare-and-swap loop, which
// thousands of blocks on one word turn into a queue (143 us for 16,384 tiles at 8192^2
// on the H200). NVVM's scoped atomic intrinsics, called as externs, become single PTX
// `atom` instructions instead.
#pragma once

#include <string>

#include "Halide.h"

namespace schedx {

// `op` (max, add or exch) applied at `address` (a uint64 holding a device pointer to a
// 32-bit word) with `value`; the word's old value. max compares as signed int32. System
// scope: the widest of the two scopes (CTA, system) the intrinsics offer.
inline Halide::Expr device_atomic_u32(const std::string &op, Halide::Expr address, Halide::Expr value) {
    using namespace Halide;
    return Internal::Call::make(UInt(32), "llvm.nvvm.atomic." + op + ".gen.i.sys.i32.p0",
                                {reinterpret(Handle(), address), cast<uint32_t>(value)}, Internal::Call::Extern);
}

// The same atomic with its old value discarded: issued, and no thread waits for its round
// trip to L2 (ptxas makes it a RED). The Expr is zero; store it so that Halide keeps the
// call. Halide's simplifier drops a call along with a plain `& 0`, and a loop-invariant
// zero is hoisted out of the kernel and passed in, so the result is read again:
// umin(anchor, 0), with `anchor` a loop variable of the storing stage, is a zero only LLVM folds.
inline Halide::Expr device_atomic_u32_discarded(const std::string &op, Halide::Expr address, Halide::Expr value,
                                                Halide::Expr anchor) {
    using namespace Halide;
    Expr zero = Internal::Call::make(UInt(32), "llvm.umin.i32", {cast<uint32_t>(anchor), cast<uint32_t>(0)},
                                     Internal::Call::PureExtern);
    return device_atomic_u32(op, address, value) & zero;
}

// The unsigned maximum of `value` over the 32 lanes of the calling warp, in every lane
// (one REDUX instruction, sm_80 and later). All 32 lanes must execute it together.
inline Halide::Expr warp_max_u32(Halide::Expr value) {
    using namespace Halide;
    return Internal::Call::make(UInt(32), "llvm.nvvm.redux.sync.umax", {cast<uint32_t>(value), cast<uint32_t>(Expr(int32_t(-1)))},
                                Internal::Call::Extern);
}

}  // namespace schedx
