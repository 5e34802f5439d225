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
constexpr int kCaptureModeRelaxed = 2;                   // CU_STREAM_CAPTURE_MODE_RELAXED

struct Cublas {
    int (*create)(void **);
    int (*set_stream)(void *, void *);
    int (*gemm_ex)(void *, int, int, int, int, int, const void *, const void *, int, int, const void *, int, int,
                   const void *, void *, int, int, int, int);
    // Driver entry points for making the caller's context current while cuBLAS (which
    // uses the runtime API) creates its handle.
    int (*ctx_push)(void *);
    int (*ctx_pop)(void **);
    int (*exchange_capture_mode)(int *);  // cuThreadExchangeStreamCaptureMode
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
               sym(lib, b.gemm_ex, "cublasGemmEx") && sym(cuda, b.ctx_push, "cuCtxPushCurrent_v2") &&
               sym(cuda, b.ctx_pop, "cuCtxPopCurrent_v2") &&
               sym(cuda, b.exchange_capture_mode, "cuThreadExchangeStreamCaptureMode");
    });
    return b;
}

// One cuBLAS handle per (context, stream): a handle carries its own internal workspace,
// so sharing one across streams would race.
std::mutex handles_mutex;  // guards `handles`
std::map<std::pair<void *, void *>, void *> handles;

struct ContextScope {
    explicit ContextScope(void *ctx) { cublas().ctx_push(ctx); }
    ~ContextScope() {
        void *popped = nullptr;
        cublas().ctx_pop(&popped);
    }
};

}  // namespace

bool cublas_available() { return cublas().ok; }

schedx_status cublas_gemm_abt(void *context, void *stream, bool fp16, const void *a, int64_t lda, const void *b,
                              int64_t ldb, void *c, bool c_half, int64_t ldc, int64_t m, int64_t n, int64_t k) {
    Cublas &cb = cublas();
    if (!cb.ok) return fail(SCHEDX_ERR_NO_VARIANT, "cuBLAS (libcublas.so.13/.12) is not available");
    std::lock_guard<std::mutex> lock(handles_mutex);
    void *&handle = handles[{context, stream}];
    ContextScope scope(context);
    if (!handle) {
        // The first call on a stream may come while it is captured into a CUDA graph;
        // relaxed mode lets cublasCreate allocate there (as cuda_workspace does).
        int mode = kCaptureModeRelaxed;
        cb.exchange_capture_mode(&mode);
        int r = cb.create(&handle);
        cb.exchange_capture_mode(&mode);
        if (r != 0) return fail(SCHEDX_ERR_KERNEL, "cublasCreate failed: " + std::to_string(r));
    }
    // Column-major view: c^T [n x m] = (b [k x n])^T * a^T [k x m].
    const float alpha = 1.0f, beta = 0.0f;
    const int t = fp16 ? kR16F : kR16BF;
    int r = cb.set_stream(handle, stream);
    if (r == 0) {
        r = cb.gemm_ex(handle, kOpT, kOpN, int(n), int(m), int(k), &alpha, b, t, int(ldb), a, t, int(lda), &beta, c,
                       c_half ? t : kR32F, int(ldc), kCompute32F, kGemmDefault);
    }
    return r == 0 ? SCHEDX_OK : fail(SCHEDX_ERR_KERNEL, "cublasGemmEx failed: " + std::to_string(r));
}

}  // namespace schedx
