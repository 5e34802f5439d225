#include "cublas_gemm.h"

#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

#include "cuda_interop.h"
#include "status.h"

namespace schedx {
namespace {

// cuBLAS types reduced to ints and pointers, as cuda_interop.cpp does for the driver's.
constexpr int kOpN = 0, kOpT = 1;                        // CUBLAS_OP_N / _T
constexpr int kR16F = 2, kR16BF = 14, kR32F = 0;         // CUDA_R_16F / _16BF / _32F
constexpr int kCompute32F = 68;                          // CUBLAS_COMPUTE_32F
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

// cuBLASLt, reduced the same way (values from cublasLt.h of CUDA 12 and 13).
constexpr int kLtDescPointerMode = 2, kLtDescTransA = 3, kLtDescTransB = 4;
constexpr int kLtPointerAlphaVectorBetaZero = 3;  // CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO
constexpr int kLtPrefMaxWorkspace = 1, kLtPrefReductionMask = 3, kLtPrefMinAlignA = 5;  // B, C, D: 6, 7, 8
// NONE | INPLACE | COMPUTE_TYPE: no split-K reduction in the 16-bit output type (as
// kMathExactReduction for cublasGemmEx).
constexpr uint32_t kLtReductionNotInOutputType = 0 | 1 | 2;

struct LtAlgo {
    uint64_t data[8];
};
struct LtHeuristicResult {  // cublasLtMatmulHeuristicResult_t
    LtAlgo algo;
    size_t workspace_size;
    int state;
    float waves;
    int reserved[4];
};

struct CublasLt {
    int (*create)(void **);
    int (*desc_create)(void **, int, int);
    int (*desc_set)(void *, int, const void *, size_t);
    int (*layout_create)(void **, int, uint64_t, uint64_t, int64_t);
    int (*pref_create)(void **);
    int (*pref_set)(void *, int, const void *, size_t);
    int (*pref_destroy)(void *);
    int (*heuristic)(void *, void *, void *, void *, void *, void *, void *, int, LtHeuristicResult *, int *);
    int (*matmul)(void *, void *, const void *, const void *, void *, const void *, void *, const void *,
                  const void *, void *, void *, void *, const LtAlgo *, void *, size_t, void *);
    bool ok = false;
};

CublasLt &cublaslt() {
    static CublasLt b;
    static std::once_flag once;
    std::call_once(once, [] {
        void *lib = dlopen_first({"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"});
        b.ok = lib && bind_symbol(lib, b.create, "cublasLtCreate") &&
               bind_symbol(lib, b.desc_create, "cublasLtMatmulDescCreate") &&
               bind_symbol(lib, b.desc_set, "cublasLtMatmulDescSetAttribute") &&
               bind_symbol(lib, b.layout_create, "cublasLtMatrixLayoutCreate") &&
               bind_symbol(lib, b.pref_create, "cublasLtMatmulPreferenceCreate") &&
               bind_symbol(lib, b.pref_set, "cublasLtMatmulPreferenceSetAttribute") &&
               bind_symbol(lib, b.pref_destroy, "cublasLtMatmulPreferenceDestroy") &&
               bind_symbol(lib, b.heuristic, "cublasLtMatmulAlgoGetHeuristic") &&
               bind_symbol(lib, b.matmul, "cublasLtMatmul");
    });
    return b;
}

// The largest power of two (up to 256) that divides a pointer: cuBLASLt's heuristic
// otherwise assumes 256-byte aligned operands.
uint32_t alignment_of(const void *p) {
    uint32_t a = 256;
    while (a > 1 && reinterpret_cast<uintptr_t>(p) % a != 0) a /= 2;
    return a;
}

// A cuBLASLt call's descriptors and chosen algorithm, made once per shape, layout and
// operand alignment (the heuristic query costs far more host time than the GEMM launch).
struct LtPlan {
    void *desc = nullptr, *a = nullptr, *b = nullptr, *c = nullptr;
    LtAlgo algo{};
    bool tried = false, ok = false;  // one heuristic query per key, even when it finds nothing
    int heuristic_status = 0;  // the first failing cuBLASLt status of the setup, if any
};
using LtKey = std::tuple<void *, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, uint32_t, uint32_t,
                         uint32_t>;
std::mutex lt_mutex;  // guards lt_handles and lt_plans
std::map<void *, void *> lt_handles;  // one per context: cuBLASLt handles carry no stream
std::map<LtKey, LtPlan> lt_plans;     // descriptors live as long as the process

}  // namespace

bool cublas_available() { return cublas().ok; }

bool cublaslt_available() { return cublaslt().ok; }

schedx_status cublaslt_gemm_abt_row_scaled(void *context, void *stream, bool fp16, const void *a, int64_t lda,
                                           const void *b, int64_t ldb, void *c, int64_t ldc, const float *row_scale,
                                           int64_t m, int64_t n, int64_t k, void *workspace, size_t workspace_bytes) {
    CublasLt &lt = cublaslt();
    if (!lt.ok) return fail(SCHEDX_ERR_NO_VARIANT, "cuBLASLt (libcublasLt.so.13/.12) is not available");
    std::lock_guard<std::mutex> lock(lt_mutex);
    CudaContextScope scope(context);
    if (!scope.ok()) return fail(SCHEDX_ERR_KERNEL, "cannot make the context current");
    void *&handle = lt_handles[context];
    if (!handle) {
        int r = lt.create(&handle);
        if (r != 0) return fail(SCHEDX_ERR_KERNEL, "cublasLtCreate failed: " + std::to_string(r));
    }
    // Column-major view, as cublas_gemm_abt: c^T [n x m] = (b [k x n])^T * a^T [k x m], so
    // that the alpha vector runs over the rows of c^T, the n of y.
    const uint32_t al_a = alignment_of(b), al_b = alignment_of(a), al_c = alignment_of(c);
    LtPlan &plan = lt_plans[{context, fp16, m, n, k, lda, ldb, ldc, al_a, al_b, al_c}];
    const int t = fp16 ? kR16F : kR16BF;
    if (!plan.tried) {
        plan.tried = true;
        const int trans_a = kOpT, trans_b = kOpN, mode = kLtPointerAlphaVectorBetaZero;
        int r = lt.desc_create(&plan.desc, kCompute32F, kR32F);  // fp32 accumulation and scale
        if (r == 0) r = lt.desc_set(plan.desc, kLtDescPointerMode, &mode, sizeof mode);
        if (r == 0) r = lt.desc_set(plan.desc, kLtDescTransA, &trans_a, sizeof trans_a);
        if (r == 0) r = lt.desc_set(plan.desc, kLtDescTransB, &trans_b, sizeof trans_b);
        if (r == 0) r = lt.layout_create(&plan.a, t, uint64_t(k), uint64_t(n), ldb);
        if (r == 0) r = lt.layout_create(&plan.b, t, uint64_t(k), uint64_t(m), lda);
        if (r == 0) r = lt.layout_create(&plan.c, t, uint64_t(n), uint64_t(m), ldc);
        void *pref = nullptr;
        if (r == 0) r = lt.pref_create(&pref);
        const uint64_t ws = workspace_bytes;
        const uint32_t reduction = kLtReductionNotInOutputType, align[4] = {al_a, al_b, al_c, al_c};
        if (r == 0) r = lt.pref_set(pref, kLtPrefMaxWorkspace, &ws, sizeof ws);
        if (r == 0) r = lt.pref_set(pref, kLtPrefReductionMask, &reduction, sizeof reduction);
        for (int i = 0; i < 4 && r == 0; i++) r = lt.pref_set(pref, kLtPrefMinAlignA + i, &align[i], sizeof align[i]);
        LtHeuristicResult result{};
        int found = 0;
        if (r == 0) r = lt.heuristic(handle, plan.desc, plan.a, plan.b, plan.c, plan.c, pref, 1, &result, &found);
        if (pref) lt.pref_destroy(pref);
        plan.ok = r == 0 && found > 0 && result.state == 0;
        plan.algo = result.algo;
        plan.heuristic_status = r;
    }
    if (!plan.ok) {
        return fail(SCHEDX_ERR_NO_VARIANT, "cuBLASLt has no algorithm with a per-row alpha vector for this call "
                                           "(cuBLASLt status " + std::to_string(plan.heuristic_status) + ")");
    }
    const float beta = 0.0f;
    const int r = lt.matmul(handle, plan.desc, row_scale, b, plan.a, a, plan.b, &beta, c, plan.c, c, plan.c,
                            &plan.algo, workspace, workspace_bytes, stream);
    return r == 0 ? SCHEDX_OK : fail(SCHEDX_ERR_KERNEL, "cublasLtMatmul failed: " + std::to_string(r));
}

schedx_status cublas_gemm_abt(void *context, void *stream, bool fp16, const void *a, int64_t lda, const void *b,
                              int64_t ldb, void *c, bool c_half, int64_t ldc, int64_t m, int64_t n, int64_t k) {
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
    // Column-major view: c^T [n x m] = (b [k x n])^T * a^T [k x m].
    const float alpha = 1.0f, beta = 0.0f;
    const int t = fp16 ? kR16F : kR16BF;
    int r = cb.set_stream(handle, stream);
    if (r == 0) r = cb.set_math_mode(handle, kMathExactReduction);
    if (r == 0) {
        r = cb.gemm_ex(handle, kOpT, kOpN, int(n), int(m), int(k), &alpha, b, t, int(ldb), a, t, int(lda), &beta, c,
                       c_half ? t : kR32F, int(ldc), kCompute32F, kGemmDefault);
    }
    return r == 0 ? SCHEDX_OK : fail(SCHEDX_ERR_KERNEL, "cublasGemmEx failed: " + std::to_string(r));
}

}  // namespace schedx
