#include "cublas_gemm.h"

#ifdef SCHEDX_CHECK_CUBLAS_ABI  // compile-time checks only: neither library is linked
#include <cublasLt.h>
#include <cublas_v2.h>
#endif

#include <cstddef>
#include <cstdio>
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

// cuBLASLt, dlopened the same way, for a pinned configuration of the int8 GEMM and a
// ranked heuristic pick for the 16-bit one: its enums as ints, its algorithm and
// heuristic-result structs by their documented layouts.
constexpr int kLtTransA = 3, kLtTransB = 4;                      // CUBLASLT_MATMUL_DESC_TRANSA / _B
constexpr int kLtTile = 1, kLtSplitK = 2, kLtStages = 6;         // CUBLASLT_ALGO_CONFIG_TILE_ID / ...
constexpr int kLtPrefWorkspace = 1, kLtPrefReduction = 3;        // CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES / _REDUCTION_SCHEME_MASK
constexpr int kLtPrefAlignA = 5, kLtPrefAlignB = 6, kLtPrefAlignC = 7, kLtPrefAlignD = 8;  // ..._MIN_ALIGNMENT_*_BYTES
// CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE: split-K slices are summed in fp32, never in the
// 16-bit output type (as kMathExactReduction asks of cublasGemmEx).
constexpr uint32_t kLtReductionInCompute = 2;
struct LtAlgo {                                                  // cublasLtMatmulAlgo_t
    uint64_t data[8];
};
struct LtResult {                                                // cublasLtMatmulHeuristicResult_t
    LtAlgo algo;
    size_t workspace_bytes;
    int state;
    float waves;
    int reserved[4];
};

#ifdef SCHEDX_CHECK_CUBLAS_ABI  // the ints and layouts above, against the toolkit's headers
static_assert(kOpN == CUBLAS_OP_N && kOpT == CUBLAS_OP_T);
static_assert(kR16F == CUDA_R_16F && kR16BF == CUDA_R_16BF && kR32F == CUDA_R_32F && kR8I == CUDA_R_8I &&
              kR32I == CUDA_R_32I);
static_assert(kCompute32F == CUBLAS_COMPUTE_32F && kCompute32I == CUBLAS_COMPUTE_32I);
static_assert(kGemmDefault == CUBLAS_GEMM_DEFAULT);
static_assert(kMathExactReduction == (CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
static_assert(kLtTransA == CUBLASLT_MATMUL_DESC_TRANSA && kLtTransB == CUBLASLT_MATMUL_DESC_TRANSB);
static_assert(kLtTile == CUBLASLT_ALGO_CONFIG_TILE_ID && kLtSplitK == CUBLASLT_ALGO_CONFIG_SPLITK_NUM &&
              kLtStages == CUBLASLT_ALGO_CONFIG_STAGES_ID);
static_assert(kLtPrefWorkspace == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES &&
              kLtPrefReduction == CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK &&
              kLtReductionInCompute == CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE);
static_assert(kLtPrefAlignA == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES &&
              kLtPrefAlignB == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES &&
              kLtPrefAlignC == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES &&
              kLtPrefAlignD == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES);
static_assert(sizeof(LtAlgo) == sizeof(cublasLtMatmulAlgo_t));
static_assert(sizeof(LtResult) == sizeof(cublasLtMatmulHeuristicResult_t) &&
              offsetof(LtResult, workspace_bytes) == offsetof(cublasLtMatmulHeuristicResult_t, workspaceSize) &&
              offsetof(LtResult, state) == offsetof(cublasLtMatmulHeuristicResult_t, state));
#endif

struct CublasLt {
    int (*create)(void **);
    int (*desc_create)(void **, int, int);
    int (*desc_set)(void *, int, const void *, size_t);
    int (*layout_create)(void **, int, uint64_t, uint64_t, int64_t);
    int (*algo_init)(void *, int, int, int, int, int, int, int, LtAlgo *);
    int (*algo_set)(LtAlgo *, int, const void *, size_t);
    int (*algo_check)(void *, void *, void *, void *, void *, void *, const LtAlgo *, LtResult *);
    int (*pref_create)(void **);
    int (*pref_set)(void *, int, const void *, size_t);
    int (*pref_destroy)(void *);
    int (*heuristic)(void *, void *, void *, void *, void *, void *, void *, int, LtResult *, int *);
    int (*matmul)(void *, void *, const void *, const void *, void *, const void *, void *, const void *,
                  const void *, void *, void *, void *, const LtAlgo *, void *, size_t, void *);
    bool ok = false;
};

CublasLt &cublas_lt() {
    static CublasLt b;
    static std::once_flag once;
    std::call_once(once, [] {
        void *lib = dlopen_first({"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"});
        b.ok = lib && bind_symbol(lib, b.create, "cublasLtCreate") &&
               bind_symbol(lib, b.desc_create, "cublasLtMatmulDescCreate") &&
               bind_symbol(lib, b.desc_set, "cublasLtMatmulDescSetAttribute") &&
               bind_symbol(lib, b.layout_create, "cublasLtMatrixLayoutCreate") &&
               bind_symbol(lib, b.algo_init, "cublasLtMatmulAlgoInit") &&
               bind_symbol(lib, b.algo_set, "cublasLtMatmulAlgoConfigSetAttribute") &&
               bind_symbol(lib, b.algo_check, "cublasLtMatmulAlgoCheck") &&
               bind_symbol(lib, b.pref_create, "cublasLtMatmulPreferenceCreate") &&
               bind_symbol(lib, b.pref_set, "cublasLtMatmulPreferenceSetAttribute") &&
               bind_symbol(lib, b.pref_destroy, "cublasLtMatmulPreferenceDestroy") &&
               bind_symbol(lib, b.heuristic, "cublasLtMatmulAlgoGetHeuristic") &&
               bind_symbol(lib, b.matmul, "cublasLtMatmul");
    });
    return b;
}

// One GEMM (types, shape, leading dimensions, pointer alignments) with one choice of
// algorithm, set up once: the descriptors, the algorithm and its workspace, or unusable
// where cuBLASLt refuses the choice there.
struct LtPlan {
    void *handle = nullptr, *desc = nullptr, *a = nullptr, *b = nullptr, *c = nullptr;
    LtAlgo algo{};
    size_t workspace_bytes = 0;
    bool usable = false;
};
// The choice: a pinned configuration (algo, tile, stages; rank -1) or the heuristic's
// result of a rank (the configuration ids 0).
struct LtChoice {
    int algo = 0, tile = 0, stages = 0, rank = -1;
};
using LtKey = std::tuple<void *, int, int, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int,
                         int, int, int, int>;
std::mutex lt_mutex;  // guards `lt_handles` and `lt_plans`
std::map<void *, void *> lt_handles;
std::map<LtKey, LtPlan> lt_plans;
thread_local bool last_gemm_lt = false;  // see last_gemm_was_cublaslt

// The largest power of two up to 256 dividing the address: cuBLASLt's heuristic assumes
// 256-byte aligned matrices unless told otherwise.
uint32_t alignment_of(const void *p) {
    uint32_t a = 256;
    while (a > 1 && reinterpret_cast<uintptr_t>(p) % a != 0) a /= 2;
    return a;
}

// The plan for c^T [n x m] = (b [k x n])^T * a^T [k x m] (column-major) in `context` (current),
// a and b of type_ab, c of type_c; nullptr where cuBLASLt is missing or refuses the choice.
const LtPlan *lt_plan(void *context, int type_ab, int type_c, int compute, const LtChoice &choice, const void *a,
                      int64_t lda, const void *b, int64_t ldb, const void *c, int64_t ldc, int64_t m, int64_t n,
                      int64_t k, size_t max_workspace) {
    CublasLt &lt = cublas_lt();
    if (!lt.ok) return nullptr;
    const uint32_t align_a = alignment_of(a), align_b = alignment_of(b), align_c = alignment_of(c);
    std::lock_guard<std::mutex> lock(lt_mutex);
    LtPlan &p = lt_plans[{context, type_ab, type_c, compute, lda, ldb, ldc, m, n, k, choice.algo, choice.tile,
                          choice.stages, choice.rank, int(align_a), int(align_b), int(align_c)}];
    if (p.handle) return p.usable ? &p : nullptr;
    void *&handle = lt_handles[context];
    if (!handle && lt.create(&handle) != 0) return nullptr;
    p.handle = handle;
    const int trans_a = kOpT, trans_b = kOpN;
    const int scale_type = compute == kCompute32I ? kR32I : kR32F;
    p.usable = lt.desc_create(&p.desc, compute, scale_type) == 0 &&
               lt.desc_set(p.desc, kLtTransA, &trans_a, sizeof trans_a) == 0 &&
               lt.desc_set(p.desc, kLtTransB, &trans_b, sizeof trans_b) == 0 &&
               lt.layout_create(&p.a, type_ab, uint64_t(k), uint64_t(n), ldb) == 0 &&
               lt.layout_create(&p.b, type_ab, uint64_t(k), uint64_t(m), lda) == 0 &&
               lt.layout_create(&p.c, type_c, uint64_t(n), uint64_t(m), ldc) == 0;
    if (!p.usable) return nullptr;
    LtResult found{};
    if (choice.rank < 0) {
        const uint32_t tile = uint32_t(choice.tile), stages = uint32_t(choice.stages), split_k = 1;
        p.usable = lt.algo_init(handle, compute, scale_type, type_ab, type_ab, type_c, type_c, choice.algo, &p.algo) == 0 &&
                   lt.algo_set(&p.algo, kLtTile, &tile, sizeof tile) == 0 &&
                   lt.algo_set(&p.algo, kLtStages, &stages, sizeof stages) == 0 &&
                   lt.algo_set(&p.algo, kLtSplitK, &split_k, sizeof split_k) == 0 &&
                   lt.algo_check(handle, p.desc, p.a, p.b, p.c, p.c, &p.algo, &found) == 0;
    } else {
        // The heuristic's list for this call (ranked by cuBLASLt's own estimate), of
        // which the choice takes one: exploration times each rank.
        void *pref = nullptr;
        constexpr int kMaxRanks = 16;
        LtResult list[kMaxRanks];
        int count = 0;
        p.usable = choice.rank < kMaxRanks && lt.pref_create(&pref) == 0 &&
                   lt.pref_set(pref, kLtPrefWorkspace, &max_workspace, sizeof max_workspace) == 0 &&
                   lt.pref_set(pref, kLtPrefReduction, &kLtReductionInCompute, sizeof kLtReductionInCompute) == 0 &&
                   lt.pref_set(pref, kLtPrefAlignA, &align_b, sizeof align_b) == 0 &&  // cuBLASLt's A is our b
                   lt.pref_set(pref, kLtPrefAlignB, &align_a, sizeof align_a) == 0 &&
                   lt.pref_set(pref, kLtPrefAlignC, &align_c, sizeof align_c) == 0 &&
                   lt.pref_set(pref, kLtPrefAlignD, &align_c, sizeof align_c) == 0 &&
                   lt.heuristic(handle, p.desc, p.a, p.b, p.c, p.c, pref, choice.rank + 1, list, &count) == 0 &&
                   count > choice.rank && list[choice.rank].state == 0;
        if (p.usable) {
            p.algo = list[choice.rank].algo;
            found = list[choice.rank];
        }
        if (pref) lt.pref_destroy(pref);
    }
    p.workspace_bytes = found.workspace_bytes;
    p.usable = p.usable && p.workspace_bytes <= max_workspace;
    return p.usable ? &p : nullptr;
}

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
    // A handle serves one stream, so its stream and math mode are set once, at creation:
    // host time per call is exposed between the planes path's dependent launches.
    if (!handle) {
        void *created = nullptr;
        int r = cb.create(&created);
        if (r == 0) r = cb.set_stream(created, stream);
        if (r == 0) r = cb.set_math_mode(created, kMathExactReduction);
        if (r != 0) return fail(SCHEDX_ERR_KERNEL, "cuBLAS handle setup failed: " + std::to_string(r));
        handle = created;
    }
    last_gemm_lt = false;
    const int r = cb.gemm_ex(handle, kOpT, kOpN, int(n), int(m), int(k), alpha, b, type_ab, int(ldb), a, type_ab,
                             int(lda), beta, c, type_c, int(ldc), compute, kGemmDefault);
    return r == 0 ? SCHEDX_OK : fail(SCHEDX_ERR_KERNEL, "cublasGemmEx failed: " + std::to_string(r));
}

// Through the plan where cuBLASLt takes the choice; else through cublasGemmEx's own pick.
schedx_status gemm_abt_with(void *context, void *stream, int type_ab, int type_c, int compute, const void *alpha,
                            const void *beta, const void *a, int64_t lda, const void *b, int64_t ldb, void *c,
                            int64_t ldc, int64_t m, int64_t n, int64_t k, const LtChoice &choice, void *workspace,
                            size_t workspace_bytes) {
    {
        // Current while the plan is made too: cuBLASLt checks a choice against the current device.
        CudaContextScope scope(context);
        if (!scope.ok()) return fail(SCHEDX_ERR_KERNEL, "cannot make the context current");
        if (const LtPlan *plan = lt_plan(context, type_ab, type_c, compute, choice, a, lda, b, ldb, c, ldc, m, n, k,
                                         workspace_bytes)) {
            const int r = cublas_lt().matmul(plan->handle, plan->desc, alpha, b, plan->a, a, plan->b, beta, c, plan->c,
                                             c, plan->c, &plan->algo, workspace, plan->workspace_bytes, stream);
            last_gemm_lt = true;
            return r == 0 ? SCHEDX_OK : fail(SCHEDX_ERR_KERNEL, "cublasLtMatmul failed: " + std::to_string(r));
        }
    }
    return gemm_abt(context, stream, type_ab, type_c, compute, alpha, beta, a, lda, b, ldb, c, ldc, m, n, k);
}

}  // namespace

schedx_status cublas_gemm_abt(void *context, void *stream, bool fp16, const void *a, int64_t lda, const void *b,
                              int64_t ldb, void *c, bool c_half, int64_t ldc, int64_t m, int64_t n, int64_t k,
                              int heuristic_rank, void *lt_workspace) {
    const float alpha = 1.0f, beta = 0.0f;
    const int t = fp16 ? kR16F : kR16BF, type_c = c_half ? t : kR32F;
    if (heuristic_rank >= 0) {
        LtChoice choice;
        choice.rank = heuristic_rank;
        return gemm_abt_with(context, stream, t, type_c, kCompute32F, &alpha, &beta, a, lda, b, ldb, c, ldc, m, n, k,
                             choice, lt_workspace, kCublasLtWorkspaceBytes);
    }
    return gemm_abt(context, stream, t, type_c, kCompute32F, &alpha, &beta, a, lda, b, ldb, c, ldc, m, n, k);
}

bool parse_cublaslt_config(std::string_view text, CublasLtConfig *out) {
    const std::string s(text);
    int used = 0;
    return std::sscanf(s.c_str(), "%d,%d,%d%n", &out->algo, &out->tile, &out->stages, &used) == 3 &&
           size_t(used) == s.size() && out->algo >= 0 && out->tile > 0 && out->stages > 0;
}

schedx_status cublas_gemm_i8_abt(void *context, void *stream, const int8_t *a, int64_t lda, const int8_t *b,
                                 int64_t ldb, int32_t *c, int64_t ldc, int64_t m, int64_t n, int64_t k,
                                 const CublasLtConfig *pinned) {
    const int32_t alpha = 1, beta = 0;
    if (pinned) {
        LtChoice choice;
        choice.algo = pinned->algo;
        choice.tile = pinned->tile;
        choice.stages = pinned->stages;
        return gemm_abt_with(context, stream, kR8I, kR32I, kCompute32I, &alpha, &beta, a, lda, b, ldb, c, ldc, m, n, k,
                             choice, nullptr, 0);
    }
    return gemm_abt(context, stream, kR8I, kR32I, kCompute32I, &alpha, &beta, a, lda, b, ldb, c, ldc, m, n, k);
}

bool cublas_available() { return cublas().ok; }

bool last_gemm_was_cublaslt() { return last_gemm_lt; }

}  // namespace schedx
