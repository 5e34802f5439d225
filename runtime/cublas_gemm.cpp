#include "cublas_gemm.h"

#include <dlfcn.h>

#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "status.h"

namespace schedx {
namespace {

// cuBLAS and driver types reduced to ints and pointers, as in cuda_interop.cpp.
constexpr int kOpN = 0, kOpT = 1;                        // CUBLAS_OP_N / _T
constexpr int kR16F = 2, kR16BF = 14, kR32F = 0;         // CUDA_R_16F / _16BF / _32F
constexpr int kCompute32F = 68;                          // CUBLAS_COMPUTE_32F
constexpr int kGemmDefault = -1;                         // CUBLAS_GEMM_DEFAULT

struct Cublas {
    int (*create)(void **);
    int (*set_stream)(void *, void *);
    int (*gemm_ex)(void *, int, int, int, int, int, const void *, const void *, int, int, const void *, int, int,
                   const void *, void *, int, int, int, int);
    // Driver entry points for the scratch memory and for making the caller's context
    // current while cuBLAS (which uses the runtime API) creates its handle.
    int (*mem_alloc)(uint64_t *, size_t);
    int (*mem_free)(uint64_t);
    int (*ctx_push)(void *);
    int (*ctx_pop)(void **);
    int (*stream_sync)(void *);
    bool ok = false;
};

Cublas &cublas() {
    static Cublas b;
    static std::once_flag once;
    std::call_once(once, [] {
        void *lib = nullptr;
        for (const char *name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}) {
            if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
        }
        // The driver is loaded already when a CUDA call gets here (check_device).
        void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        if (!lib || !cuda) return;
        auto sym = [](void *l, auto &fn, const char *name) {
            fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(l, name));
            return fn != nullptr;
        };
        b.ok = sym(lib, b.create, "cublasCreate_v2") && sym(lib, b.set_stream, "cublasSetStream_v2") &&
               sym(lib, b.gemm_ex, "cublasGemmEx") && sym(cuda, b.mem_alloc, "cuMemAlloc_v2") &&
               sym(cuda, b.mem_free, "cuMemFree_v2") && sym(cuda, b.ctx_push, "cuCtxPushCurrent_v2") &&
               sym(cuda, b.ctx_pop, "cuCtxPopCurrent_v2") && sym(cuda, b.stream_sync, "cuStreamSynchronize");
    });
    return b;
}

// Per (context, stream): the scratch and a cuBLAS handle (a handle carries its own
// internal workspace, so sharing one across streams would race as well).
struct StreamState {
    uint64_t scratch = 0;
    size_t bytes = 0;
    void *handle = nullptr;
    std::mutex in_use;  // see lock_stream_workspace
};
std::mutex state_mutex;  // guards `states` and each entry's fields
std::map<std::pair<void *, void *>, StreamState> states;

struct ContextScope {
    explicit ContextScope(void *ctx) { cublas().ctx_push(ctx); }
    ~ContextScope() {
        void *popped = nullptr;
        cublas().ctx_pop(&popped);
    }
};

}  // namespace

bool cublas_available() { return cublas().ok; }

std::unique_lock<std::mutex> lock_stream_workspace(void *context, void *stream) {
    std::mutex *in_use;
    {
        std::lock_guard<std::mutex> lock(state_mutex);
        in_use = &states[{context, stream}].in_use;  // map entries never move
    }
    return std::unique_lock<std::mutex>(*in_use);
}

schedx_status cuda_workspace(void *context, void *stream, size_t bytes, void **ptr) {
    Cublas &b = cublas();
    if (!b.ok) return fail(SCHEDX_ERR_NO_VARIANT, "cuBLAS (libcublas.so.13/.12) is not available");
    std::lock_guard<std::mutex> lock(state_mutex);
    StreamState &s = states[{context, stream}];
    if (s.bytes < bytes) {
        ContextScope scope(context);
        // Earlier calls on this stream may still read the old scratch.
        if (s.scratch && (b.stream_sync(stream) != 0 || b.mem_free(s.scratch) != 0)) {
            return fail(SCHEDX_ERR_KERNEL, "cannot release the w8_linear workspace");
        }
        s.scratch = 0;
        s.bytes = 0;
        if (b.mem_alloc(&s.scratch, bytes) != 0) {
            return fail(SCHEDX_ERR_KERNEL, "cannot allocate a " + std::to_string(bytes) + "-byte w8_linear workspace");
        }
        s.bytes = bytes;
    }
    *ptr = reinterpret_cast<void *>(s.scratch);
    return SCHEDX_OK;
}

schedx_status cublas_gemm_abt(void *context, void *stream, bool fp16, const void *a, int64_t lda, const void *b,
                              int64_t ldb, float *c, int64_t ldc, int64_t m, int64_t n, int64_t k) {
    Cublas &cb = cublas();
    if (!cb.ok) return fail(SCHEDX_ERR_NO_VARIANT, "cuBLAS (libcublas.so.13/.12) is not available");
    std::lock_guard<std::mutex> lock(state_mutex);
    StreamState &s = states[{context, stream}];
    ContextScope scope(context);
    if (!s.handle) {
        int r = cb.create(&s.handle);
        if (r != 0) return fail(SCHEDX_ERR_KERNEL, "cublasCreate failed: " + std::to_string(r));
    }
    // Column-major view: c^T [n x m] = (b [k x n])^T * a^T [k x m].
    const float alpha = 1.0f, beta = 0.0f;
    const int t = fp16 ? kR16F : kR16BF;
    int r = cb.set_stream(s.handle, stream);
    if (r == 0) {
        r = cb.gemm_ex(s.handle, kOpT, kOpN, int(n), int(m), int(k), &alpha, b, t, int(ldb), a, t, int(lda), &beta, c,
                       kR32F, int(ldc), kCompute32F, kGemmDefault);
    }
    return r == 0 ? SCHEDX_OK : fail(SCHEDX_ERR_KERNEL, "cublasGemmEx failed: " + std::to_string(r));
}

}  // namespace schedx
