// A w8_linear call's arguments, how a variant's Halide arguments are bound and which
// variants may run it, in a header so that CPU tests can ask dispatch's rules about CUDA
// variants without a device (the rules read shapes, leading dimensions, pointer bits and
// whether cuBLAS loads, except an autoscheduled variant's bounds query) and run their builds
// of the CUDA algorithms with the runtime's own binding.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "dispatch.h"
#include "pipeline_call.h"
#include "registry.h"

namespace schedx {

struct W8LinearCall {
    const void *x;
    int64_t m, k, ldx;
    const int8_t *w;
    int64_t n, ldw;
    const void *scales, *bias;
    int scale_bytes;
    void *y;
    int64_t ldy;
};

// Whether variant `v` computes a call of these dtypes and bias (its own kernels or, for the
// cuBLAS paths, through an epilogue); which shapes it runs is can_run's.
bool serves(const Variant &v, std::string_view x_type, std::string_view scale_type, bool bias);

// Binds x, w, scales, bias and y of a one-pipeline variant (the lane, mma and general kernels).
void bind_linear(PipelineCall &call, const W8LinearCall &c);

// Whether variant `v` can run call `c` (shape, leading dimensions, alignment).
bool can_run(const Variant &v, const W8LinearCall &c);

// The variants of `candidates` that take `c`, in untuned preference order (variants.json's,
// those known to lose moved behind), memoised under `key`.
RunnableList runnable_w8_variants(const std::vector<const Variant *> &candidates, const RunKey &key, int device_sm,
                                  const W8LinearCall &c);

}  // namespace schedx
