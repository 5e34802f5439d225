// A cast_transpose call's arguments and which variants may run it, in a header so that CPU
// tests can ask dispatch's rules about CUDA variants without a device (the rules read only
// shapes, leading dimensions and pointer bits, except an autoscheduled variant's bounds query).
#pragma once

#include <cstdint>

#include "pipeline_call.h"
#include "registry.h"
#include "tile_cover.h"

namespace schedx {

struct CastTransposeCall {
    const void *x;
    int64_t m, k, ldx;
    int elem_bytes;
    const float *scale;
    int format;
    uint8_t *rows, *cols;
    int64_t ld_rows, ld_cols;
    float *amax, *scale_inv;
    // schedx_cast_transpose_fp8_divide: scale is the divisor (variants with scale_by=divide).
    bool divide = false;

    // The call on rows [r.row0, r.row0 + r.rows) and columns [r.col0, r.col0 + r.cols) of x.
    CastTransposeCall region(const TileRegion &r) const {
        CastTransposeCall sub = *this;
        sub.x = static_cast<const uint8_t *>(x) + (r.row0 * ldx + r.col0) * elem_bytes;
        if (rows) sub.rows = rows + r.row0 * ld_rows + r.col0;
        if (cols) sub.cols = cols + r.col0 * ld_cols + r.row0;
        sub.m = r.rows;
        sub.k = r.cols;
        return sub;
    }
};

// Binds the call's buffers and scalars to a cast_transpose pipeline (names it lacks are skipped).
void bind_cast(PipelineCall &call, const CastTransposeCall &c);

// Whether variant `v` can run call `c` (shape, leading dimensions, alignment).
bool can_run(const Variant &v, const CastTransposeCall &c);
// Untuned dispatch's rank of `v` for call `c` (lower goes first; runnable_variants).
int untuned_rank(const Variant &v, const CastTransposeCall &c);

}  // namespace schedx
