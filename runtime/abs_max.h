// max |x| into a caller's float, shared by schedx_abs_max and the cast's separate amax pass.
#pragma once

#include <cstdint>

#include "registry.h"
#include "schedx/schedx.h"

namespace schedx {

// The blocks of a CUDA abs_max variant's grid for an [m][k] input of `elem_bytes` elements:
// one word of its block sink each.
int64_t abs_max_blocks(const Variant &v, int64_t m, int64_t k, int elem_bytes);

// amax = max |x| of a non-empty [m][ldx] matrix of `in_type` ("bf16", "fp16", "fp32"),
// by the abs_max variant that dispatch picks; arguments already checked (check_spans), `ctx`
// the CUDA context of the pointers. On CUDA the work is queued on `stream`.
schedx_status run_abs_max(Device device, const char *in_type, const void *x, int64_t m, int64_t k, int64_t ldx,
                          int elem_bytes, float *amax, void *stream, void *ctx);

}  // namespace schedx
