#include "cublas_gemm.h"

#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "cuda_interop.h"
#include "status.h"

namespace schedx {
namespace {

// cuBLAS types reduced to ints and pointers, as cuda_interop.cpp does for the driver's.
constexpr int kOpN = 0, kOpT = 1;                        // CUBLAS_OP_N / _T
constexpr int kR16F = 2, kR16BF = 14, kR32F = 0;         // CUDA_R_16F / _16BF / _32F
constexpr int kR8I = 3, kR32I = 10;                      // CUDA_R_8I / _32I
constexpr int kCompute32F = 68, kCompute32I = 72;        // CUBLAS_COMPUTE_32F / _32I
constexpr int kGemmDefault = -1;                         // CUBLAS_GEMM_DEFAULT
// CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION: without it a
// split-K GEMM with a 16-bit output sums its K-slices in 16 bits (seen on the H200 at
// M <= 16: integer sums one ulp off), a rounding per slice instead of one at the end.
constexpr int kMathExactReduction = 16;

struct Cublas {
    int (*create)(void **);
    int (*set_stream)(void *, void *);
    int (*set_math_mode)(void *, int);
    int (*gemm_ex)(void *, int, int, int, int, int, const void *, const void *, int, int, const void *, int, int,
                   const void *, void *, int, int, int, int);
    bool ok = false;
};

Cublas &cublas() {
    static Cublas b;
    static std::once_flag once;
    std::call_once(once, [] {
        void *lib = dlopen_first({"libcublas.so.13", "libcublas.so.12", "libcublas.so"});
        b.ok = lib && bind_symbol(lib, b.create, "cublasCreate_v2") &&
               bind_symbol(lib, b.set_stream, "cublasSetStream_v2") &&
               bind_symbol(lib, b.set_math_mode, "cublasSetMathMode") && bind_symbol(lib, b.gemm_ex, "cublasGemmEx");
    });
    return b;
}

// One cuBLAS handle per (context, stream): a handle carries its own internal workspace,
// so sharing one across streams would race.
std::mutex handles_mutex;  // guards `handles`
std::map<std::pair<void *, void *>, void *> handles;


// c^T [n x m] = (b [k x n])^T * a^T [k x m] in cuBLAS's column-major view, on `stream` in
// `context`, with the stream's handle.
schedx_status gemm_abt(void *context, void *stream, int type_ab, int type_c, int compute, const void *alpha,
                       const void *beta, const void *a, int64_t lda, const void *b, int64_t ldb, void *c,
                       int64_t ldc, int64_t m, int64_t n, int64_t k) {
    Cublas &cb = cublas();
    if (!cb.ok) return fail(SCHEDX_ERR_NO_VARIANT, "cuBLAS (libcublas.so.13/.12) is not available");
    std::lock_guard<std::mutex> lock(handles_mutex);
    void *&handle = handles[{context, stream}];
    // cuBLAS uses the runtime API, which works in the current context; the first call on a
    // stream creates its handle (an allocation) and may come during a graph capture.
    CudaContextScope scope(context);
    if (!scope.ok()) return fail(SCHEDX_ERR_KERNEL, "cannot make the context current");
    if (!handle) {
        int r = cb.create(&handle);
        if (r != 0) return fail(SCHEDX_ERR_KERNEL, "cublasCreate failed: " + std::to_string(r));
    }
    int r = cb.set_stream(handle, stream);
    if (r == 0) r = cb.set_math_mode(handle, kMathExactReduction);
    if (r == 0) {
        r = cb.gemm_ex(handle, kOpT, kOpN, int(n), int(m), int(k), alpha, b, type_ab, int(ldb), a, type_ab, int(lda),
                       beta, c, type_c, int(ldc), compute, kGemmDefault);
    }
    return r == 0 ? SCHEDX_OK : fail(SCHEDX_ERR_KERNEL, "cublasGemmEx failed: " + std::to_string(r));
}

}  // namespace

schedx_status cublas_gemm_abt(void *context, void *stream, bool fp16, const void *a, int64_t lda, const void *b,
                              int64_t ldb, void *c, bool c_half, int64_t ldc, int64_t m, int64_t n, int64_t k) {
    const float alpha = 1.0f, beta = 0.0f;
    const int t = fp16 ? kR16F : kR16BF;
    return gemm_abt(context, stream, t, c_half ? t : kR32F, kCompute32F, &alpha, &beta, a, lda, b, ldb, c, ldc, m, n,
                    k);
}

schedx_status cublas_gemm_i8_abt(void *context, void *stream, const int8_t *a, int64_t lda, const int8_t *b,
                                 int64_t ldb, int32_t *c, int64_t ldc, int64_t m, int64_t n, int64_t k) {
    const int32_t alpha = 1, beta = 0;
    return gemm_abt(context, stream, kR8I, kR32I, kCompute32I, &alpha, &beta, a, lda, b, ldb, c, ldc, m, n, k);
}

bool cublas_available() { return cublas().ok; }

}  // namespace schedx
