// A w4_linear call's arguments and how a variant's Halide arguments are bound, in a header so
// that CPU tests run their builds of the CUDA algorithm (the lane layout) with the runtime's
// own binding.
#pragma once

#include <cstdint>

#include "dispatch.h"
#include "pipeline_call.h"

namespace schedx {

struct W4LinearCall {
    const void *x;
    int64_t m, k, ldx;
    const uint32_t *w;
    int64_t n, ldw, group_size;
    const void *scales, *zeros, *bias;
    void *y;
    int64_t ldy;
};

// Binds every argument of a w4_linear pipeline. Absent zero points and bias are bound to the
// scales (or to `dummy`, N zero halves, where K = 0 leaves no scales), read and never used:
// has_zeros and has_bias say so.
void bind_w4_linear(PipelineCall &call, const W4LinearCall &c, const void *dummy);

// The variants of `candidates` (of the call's dtypes) that take `c`, in untuned preference
// order, memoised under `key`: shape, leading dimension and alignment rules only (whether
// cuBLAS loads is the candidate list's concern), so that CPU tests check them.
RunnableList runnable_w4_variants(const std::vector<const Variant *> &candidates, const RunKey &key, int device_sm,
                                  const W4LinearCall &c);

}  // namespace schedx
