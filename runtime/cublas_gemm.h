// The GEMM of the large-M w8_linear path, through cuBLAS without a link-time dependency:
// libcublas is dlopened on first use (like the driver in cuda_interop), so libschedx
// loads and runs without the CUDA Toolkit; the path is then simply not runnable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "schedx/schedx.h"

namespace schedx {

// True once libcublas is loaded (tried on the first call, then remembered).
bool cublas_available();

// The workspace a ranked cuBLASLt GEMM may use (the caller provides this much).
constexpr size_t kCublasLtWorkspaceBytes = size_t(32) << 20;

// c[m][n] (leading dim ldc) = a[m][k] * b[n][k]^T with a and b of one 16-bit dtype (fp16
// when `fp16`, else bf16), fp32 accumulation (split-K slices summed in fp32); c is fp32,
// or of a's dtype when `c_half` (rounded once by cuBLAS). On `stream` in `context`.
// heuristic_rank >= 0: the algorithm of that rank in cuBLASLt's heuristic list for this
// call (types, shape, leading dimensions, pointer alignments; looked up once), with
// `lt_workspace` (kCublasLtWorkspaceBytes); cublasGemmEx's own pick where the list is
// shorter, and without a rank.
schedx_status cublas_gemm_abt(void *context, void *stream, bool fp16, const void *a, int64_t lda, const void *b,
                              int64_t ldb, void *c, bool c_half, int64_t ldc, int64_t m, int64_t n, int64_t k,
                              int heuristic_rank = -1, void *lt_workspace = nullptr);

// Whether this thread's last GEMM ran through cuBLASLt (a ranked or pinned choice it
// accepted) rather than cublasGemmEx: lets tests see that a variant's choice was honoured.
bool last_gemm_was_cublaslt();

// A cuBLASLt configuration of the int8 GEMM (ids of cuBLASLt's algorithm, tile and stages
// enums), from a variant's cublaslt_config "algo,tile,stages"; false where malformed.
struct CublasLtConfig {
    int algo = 0, tile = 0, stages = 0;
};
bool parse_cublaslt_config(std::string_view text, CublasLtConfig *out);

// c[m][n] (int32, leading dim ldc) = a[m][k] * b[n][k]^T with a and b int8 and exact int32
// accumulation (tensor cores): the int8 planes path of w8_linear. With `pinned`, through
// cuBLASLt in that configuration where cuBLASLt accepts it for this shape without a
// workspace (checked once per shape); else, and without it, cublasGemmEx's own pick.
schedx_status cublas_gemm_i8_abt(void *context, void *stream, const int8_t *a, int64_t lda, const int8_t *b,
                                 int64_t ldb, int32_t *c, int64_t ldc, int64_t m, int64_t n, int64_t k,
                                 const CublasLtConfig *pinned = nullptr);

}  // namespace schedx
