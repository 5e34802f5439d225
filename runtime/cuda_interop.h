// CUDA interop without a link-time dependency on the driver: libcuda is dlopened on
// first use, so libschedx loads and its CPU path works on machines without a GPU.
// Halide's CUDA runtime is pointed at the context that owns the caller's memory (the
// device's primary context, as the CUDA runtime API and PyTorch use) and at the
// caller's stream, both carried per call in the pipeline's user_context.
#pragma once

#include <dlfcn.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <string>

#include "HalideRuntime.h"
#include "schedx/schedx.h"

namespace schedx {

// The first of `names` that dlopen loads (RTLD_NOW | RTLD_LOCAL), or nullptr.
void *dlopen_first(std::initializer_list<const char *> names);

// Points `fn` at the symbol `name` of a dlopened library; false if it is missing.
template <class Fn>
bool bind_symbol(void *lib, Fn &fn, const char *name) {
    fn = reinterpret_cast<Fn>(dlsym(lib, name));
    return fn != nullptr;
}

// What Halide's acquire-context and get-stream hooks read; passed as user_context.
struct CudaCallContext {
    void *context = nullptr;  // CUcontext
    void *stream = nullptr;   // CUstream
};

// Loads the driver and installs the Halide hooks; SCHEDX_ERR_NO_CUDA if unavailable.
schedx_status cuda_init();

// Finds the primary context of the device that owns `ptr` (SCHEDX_ERR_POINTER_DEVICE if
// `ptr` is not device memory).
schedx_status cuda_context_for(const void *ptr, const char *arg_name, void **context);

// The compute capability (10 * major + minor) of the device of a context that
// cuda_context_for returned; 0 for any other. Dispatch skips variants whose min_sm is higher.
int cuda_context_sm(void *context);
// Why the last module load on this thread failed in schedx's PTX rewrite (then cleared);
// "" if it did not.
std::string take_ptx_load_error();
// True only when the driver is already loaded in this process and says `ptr` is device
// memory: lets the CPU path reject device pointers without ever starting CUDA itself.
bool is_known_device_pointer(const void *ptr);

// For the scope, CUDA modules that Halide loads on this thread are JIT-compiled with at
// most `max_registers` registers per thread (0: Halide's own cap of 64, or
// HL_CUDA_JIT_MAX_REGISTERS). A variant's `jit_max_registers` sets it around its calls:
// a module loads on a pipeline's first call in a context, so each variant keeps its cap.
class JitRegisterCap {
public:
    explicit JitRegisterCap(int max_registers);
    ~JitRegisterCap();
    JitRegisterCap(const JitRegisterCap &) = delete;
    JitRegisterCap &operator=(const JitRegisterCap &) = delete;

private:
    int previous_;
};

// For the scope, kernels that Halide launches on this thread read [base, base + bytes) as
// streaming data: an L2 access-policy window with the streaming property (evict first),
// so that an operand read once does not push out what other kernels left in L2 (dirty
// lines included). Past the device's largest window, the rest is read normally.
// SCHEDX_L2_STREAMING=0 turns it off. Used for w8_linear's W; the cast kernels write as
// many bytes as they read and gained nothing (l2_streaming_2026-12-03_h200_27c6a22.md).
class L2StreamingWindow {
public:
    L2StreamingWindow(const void *base, size_t bytes);
    ~L2StreamingWindow();
    L2StreamingWindow(const L2StreamingWindow &) = delete;
    L2StreamingWindow &operator=(const L2StreamingWindow &) = delete;

private:
    const void *previous_base_;
    size_t previous_bytes_;
};

schedx_status cuda_wrap(CudaCallContext *ctx, halide_buffer_t *buf, const void *ptr);
void cuda_detach(CudaCallContext *ctx, halide_buffer_t *buf);

// Makes `context` current on this thread for the scope (for driver calls, and for
// runtime-API libraries such as cuBLAS), with stream capture relaxed: an allocation made
// inside may come while a stream is captured into a CUDA graph (torch.cuda.graph warms up
// on one stream and captures on another) without invalidating the capture.
class CudaContextScope {
public:
    explicit CudaContextScope(void *context);
    ~CudaContextScope();
    CudaContextScope(const CudaContextScope &) = delete;
    CudaContextScope &operator=(const CudaContextScope &) = delete;
    bool ok() const { return ok_; }

private:
    bool ok_ = false;
    int capture_mode_;
};

// Held by a caller across everything it enqueues that uses the (context, stream)
// workspace: two host threads on one stream would otherwise interleave their launches
// and share one scratch between two calls in flight.
std::unique_lock<std::mutex> lock_stream_workspace(void *context, void *stream);

// Device scratch for one (context, stream): at least `bytes`, 256-byte aligned. Cached
// per device and stream, grown on demand by doubling and never freed: no allocation per
// call once warm, and an outgrown scratch stays valid for a CUDA graph that captured it.
// Calls on one stream run in order, so reusing the scratch is race-free under
// lock_stream_workspace; two streams get two scratches because their calls may overlap.
// Used by the large-M w8_linear path (dequantized W, GEMM result), by the tiled
// cast_transpose variants with fused amax (one word per tile) and by the axiswise two-pass
// quantize_fp8 variants (column maxima per strip of rows).
schedx_status cuda_workspace(void *context, void *stream, size_t bytes, void **ptr);
// `bytes` rounded up to the workspace's 256-byte alignment: the offset of the next buffer in it.
inline size_t workspace_slot_bytes(size_t bytes) { return (bytes + 255) / 256 * 256; }

// Sets `words` 32-bit words at `ptr` (device memory) to `value` (zero by default) on
// `stream`, in stream order with the kernels launched after it (and recorded into a CUDA
// graph being captured). The fused-amax cast variants accumulate the caller's amax in a
// zeroed word by atomics.
schedx_status cuda_fill_words(void *context, void *stream, void *ptr, size_t words = 1, uint32_t value = 0);

// Up to kMaxSideStreams more streams of the (context, stream) pair, created once and kept:
// fork orders the first `count` after everything enqueued on `stream` so far, join orders
// `stream` after everything enqueued on them since (events, so a CUDA graph capture of
// `stream` takes in their work). Held under lock_stream_workspace from fork to join: their
// events are shared by the pair. The ragged cast runs its shifted tile regions there, one
// stream each, beside the whole tiles.
constexpr int kMaxSideStreams = 3;
schedx_status cuda_fork_side_streams(void *context, void *stream, int count, void **sides);
schedx_status cuda_join_side_streams(void *context, void *stream, int count);

// The device's name and the driver version, for the tuning database; "" without CUDA.
std::string cuda_device_name(int ordinal = 0);
int cuda_driver_version();

}  // namespace schedx
