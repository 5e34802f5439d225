// A quantize_fp8 call's arguments, its scale arrays' shapes and how a variant's Halide
// arguments are bound, in a header so that CPU tests run their builds of the CUDA
// algorithms with the runtime's own binding.
#pragma once

#include <cstdint>

#include "pipeline_call.h"
#include "schedx/schedx.h"

namespace schedx {

struct ScaleShape {
    int64_t rows, cols;
};
// The scale array of `r` for one orientation (columnwise: the column-major copy's), padding included.
ScaleShape scale_shape(schedx_fp8_recipe r, int64_t m, int64_t k, bool columnwise);

struct QuantizeCall {
    const void *x;
    int64_t m, k, ldx;
    int elem_bytes;
    schedx_quantize_fp8_options opt;
    uint8_t *rows, *cols;
    int64_t ld_rows, ld_cols;
    void *rows_scale, *cols_scale;
    ScaleShape rs, cs;
    int scale_bytes;
};

void bind(PipelineCall &call, const QuantizeCall &c);

}  // namespace schedx
