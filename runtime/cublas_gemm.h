// The GEMM of the large-M w8_linear path, through cuBLAS without a link-time dependency:
// libcublas is dlopened on first use (like the driver in cuda_interop), so libschedx
// loads and runs without the CUDA Toolkit; the path is then simply not runnable.
#pragma once

#include <cstddef>
#include <cstdint>

#include "schedx/schedx.h"

namespace schedx {

// True once libcublas is loaded (tried on the first call, then remembered).
bool cublas_available();

// c[m][n] (leading dim ldc) = a[m][k] * b[n][k]^T with a and b of one 16-bit dtype (fp16
// when `fp16`, else bf16), fp32 accumulation; c is fp32, or of a's dtype when `c_half`
// (rounded once by cuBLAS). On `stream` in `context`.
schedx_status cublas_gemm_abt(void *context, void *stream, bool fp16, const void *a, int64_t lda, const void *b,
                              int64_t ldb, void *c, bool c_half, int64_t ldc, int64_t m, int64_t n, int64_t k);

// True once libcublasLt is loaded (tried on the first call, then remembered).
bool cublaslt_available();

// c[m][n] (leading dim ldc) = (a[m][k] * b[n][k]^T) * row_scale[n], a, b and c of one
// 16-bit dtype (fp16 when `fp16`, else bf16), fp32 accumulation, the scale applied to the
// fp32 sum and c rounded once: cuBLASLt with row_scale (fp32, on the device) as a per-row
// alpha vector of the column-major c^T. `workspace` is cuBLASLt's scratch. Fails with
// SCHEDX_ERR_NO_VARIANT when this cuBLASLt has no algorithm for the call.
schedx_status cublaslt_gemm_abt_row_scaled(void *context, void *stream, bool fp16, const void *a, int64_t lda,
                                           const void *b, int64_t ldb, void *c, int64_t ldc, const float *row_scale,
                                           int64_t m, int64_t n, int64_t k, void *workspace, size_t workspace_bytes);

// The scratch cublaslt_gemm_abt_row_scaled may use (what its heuristic is offered).
constexpr size_t kCublasLtWorkspaceBytes = size_t(32) << 20;

}  // namespace schedx
