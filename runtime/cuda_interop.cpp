#include "cuda_interop.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "HalideRuntimeCuda.h"
#include "ptx_rewrite.h"
#include "status.h"

namespace schedx {
namespace {

// The few driver entry points used, with the driver's C types reduced to ints/pointers.
using CUresult = int;
constexpr int kPointerAttributeMemoryType = 2;    // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr int kPointerAttributeDeviceOrdinal = 9; // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
constexpr unsigned kMemoryTypeDevice = 2;         // CU_MEMORYTYPE_DEVICE
constexpr int kMaxDevices = 64;
constexpr int kCaptureModeRelaxed = 2;            // CU_STREAM_CAPTURE_MODE_RELAXED

struct Driver {
    CUresult (*cuInit)(unsigned);
    CUresult (*cuPointerGetAttribute)(void *, int, uintptr_t);
    CUresult (*cuPointerGetAttributes)(unsigned, int *, void **, uintptr_t);
    CUresult (*cuDeviceGet)(int *, int);
    CUresult (*cuDeviceGetName)(char *, int, int);
    CUresult (*cuDevicePrimaryCtxRetain)(void **, int);
    CUresult (*cuDeviceGetAttribute)(int *, int, int);
    CUresult (*cuCtxGetDevice)(int *);
    CUresult (*cuDriverGetVersion)(int *);
    CUresult (*cuMemAlloc)(uint64_t *, size_t);
    CUresult (*cuMemsetD32Async)(uint64_t, unsigned, size_t, void *);
    CUresult (*cuCtxPushCurrent)(void *);
    CUresult (*cuCtxPopCurrent)(void **);
    CUresult (*cuThreadExchangeStreamCaptureMode)(int *);
    CUresult (*cuStreamCreateWithPriority)(void **, unsigned, int);
    CUresult (*cuCtxGetStreamPriorityRange)(int *, int *);
    CUresult (*cuEventCreate)(void **, unsigned);
    CUresult (*cuEventRecord)(void *, void *);
    CUresult (*cuStreamWaitEvent)(void *, void *, unsigned);
    std::atomic<void *> contexts[kMaxDevices] = {};
    std::atomic<int> sms[kMaxDevices] = {};  // compute capability of each retained context's device
    std::mutex mutex;  // serializes retaining a primary context
    bool ok = false;
    std::string error;
};

// The driver library, loaded once for schedx's own entry points and Halide's.
void *libcuda() {
    static void *lib = dlopen_first({"libcuda.so.1"});
    return lib;
}

Driver &driver() {
    static Driver d;
    static std::once_flag once;
    std::call_once(once, [] {
        void *lib = libcuda();
        if (!lib) {
            d.error = "no CUDA driver (libcuda.so.1 not found)";
            return;
        }
        auto sym = [&](auto &fn, const char *name) { return bind_symbol(lib, fn, name); };
        if (!(sym(d.cuInit, "cuInit") && sym(d.cuPointerGetAttribute, "cuPointerGetAttribute") &&
              sym(d.cuPointerGetAttributes, "cuPointerGetAttributes") &&
              sym(d.cuDeviceGet, "cuDeviceGet") && sym(d.cuDeviceGetName, "cuDeviceGetName") &&
              sym(d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain") &&
              sym(d.cuDeviceGetAttribute, "cuDeviceGetAttribute") && sym(d.cuCtxGetDevice, "cuCtxGetDevice") &&
              sym(d.cuDriverGetVersion, "cuDriverGetVersion") && sym(d.cuMemAlloc, "cuMemAlloc_v2") &&
              sym(d.cuMemsetD32Async, "cuMemsetD32Async") &&
              sym(d.cuCtxPushCurrent, "cuCtxPushCurrent_v2") &&
              sym(d.cuCtxPopCurrent, "cuCtxPopCurrent_v2") &&
              sym(d.cuThreadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode") &&
              sym(d.cuStreamCreateWithPriority, "cuStreamCreateWithPriority") &&
              sym(d.cuCtxGetStreamPriorityRange, "cuCtxGetStreamPriorityRange") && sym(d.cuEventCreate, "cuEventCreate") &&
              sym(d.cuEventRecord, "cuEventRecord") && sym(d.cuStreamWaitEvent, "cuStreamWaitEvent"))) {
            d.error = "CUDA driver lacks a required entry point";
            return;
        }
        CUresult r = d.cuInit(0);
        if (r != 0) {
            d.error = "no CUDA device (cuInit returned " + std::to_string(r) + ")";
            return;
        }
        halide_set_cuda_acquire_context([](void *uc, void **ctx, bool) -> int {
            *ctx = uc ? static_cast<CudaCallContext *>(uc)->context : nullptr;
            return *ctx ? 0 : halide_error_code_device_interface_no_device;
        });
        halide_set_cuda_release_context([](void *) -> int { return 0; });
        halide_set_cuda_get_stream([](void *uc, void *, void **stream) -> int {
            *stream = uc ? static_cast<CudaCallContext *>(uc)->stream : nullptr;
            return 0;
        });
        d.ok = true;
    });
    return d;
}

// Halide's CUDA runtime JIT-compiles every module with CU_JIT_MAX_REGISTERS = 64 (unless
// HL_CUDA_JIT_MAX_REGISTERS is set), so kernels that need more registers spill to local
// memory. It reads driver entry points through halide_cuda_get_symbol (below), which
// hands it this wrapper for cuModuleLoadDataEx: the calling thread's cap replaces Halide's.
// H200, N = K = 8192, M = 8: b8_r4w2 138.8 us at 64 registers, 61.0 at 128, 76.2 at 255.
constexpr int kJitMaxRegisters = 0;  // CU_JIT_MAX_REGISTERS
thread_local int jit_max_registers = 0;
using ModuleLoadDataEx = CUresult (*)(void **, const void *, unsigned, int *, void **);
ModuleLoadDataEx module_load_data_ex = nullptr;

constexpr int kAttributeComputeCapabilityMajor = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kAttributeComputeCapabilityMinor = 76;
constexpr CUresult kErrorInvalidPtx = 218;            // CUDA_ERROR_INVALID_PTX
constexpr CUresult kErrorNotSupported = 801;          // CUDA_ERROR_NOT_SUPPORTED
thread_local std::string ptx_load_error;

// 10 * major + minor of device `dev`, 0 if unknown.
int device_sm(Driver &d, int dev) {
    int major = 0, minor = 0;
    if (d.cuDeviceGetAttribute(&major, kAttributeComputeCapabilityMajor, dev) != 0 ||
        d.cuDeviceGetAttribute(&minor, kAttributeComputeCapabilityMinor, dev) != 0) {
        return 0;
    }
    return 10 * major + minor;
}

// Modules whose PTX calls schedx_ptx_* functions are rewritten before the driver sees them
// (ptx_rewrite.h); what fails is reported as invalid PTX, with the reason kept for
// PipelineCall's message. Halide loads a module once per context, so this runs once per
// pipeline and device.
CUresult module_load_rewritten(void **module, const void *image, unsigned n, int *options, void **values) {
    const char *ptx = static_cast<const char *>(image);
    if (!ptx || std::memcmp(ptx, "\x7f" "ELF", 4) == 0 || !ptx_has_schedx_calls(ptx)) {
        return module_load_data_ex(module, image, n, options, values);
    }
    Driver &d = driver();
    int dev = -1;
    const int sm = d.cuCtxGetDevice(&dev) == 0 ? device_sm(d, dev) : 0;
    PtxRewrite r = rewrite_ptx_calls(ptx, sm);
    if (!r.ok) {
        ptx_load_error = "PTX rewrite: " + r.error;
        return kErrorInvalidPtx;
    }
    return module_load_data_ex(module, r.ptx.c_str(), n, options, values);
}

CUresult module_load_data_ex_capped(void **module, const void *image, unsigned n, int *options, void **values) {
    if (jit_max_registers <= 0) return module_load_rewritten(module, image, n, options, values);
    std::vector<int> opts(options, options + n);
    std::vector<void *> vals(values, values + n);
    void *cap = reinterpret_cast<void *>(static_cast<uintptr_t>(jit_max_registers));
    auto it = std::find(opts.begin(), opts.end(), kJitMaxRegisters);
    if (it != opts.end()) {
        vals[it - opts.begin()] = cap;
    } else {
        opts.push_back(kJitMaxRegisters);
        vals.push_back(cap);
    }
    return module_load_rewritten(module, image, unsigned(opts.size()), opts.data(), vals.data());
}

// Halide launches every kernel with cuLaunchKernel, handed this wrapper as well: inside
// an L2StreamingWindow scope it launches through cuLaunchKernelEx with the window as an
// access-policy attribute (a per-launch attribute, so the caller's stream is untouched and
// a CUDA graph capture records it on the kernel node).
using LaunchKernel = CUresult (*)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                  void *, void **, void **);
LaunchKernel launch_kernel = nullptr;

// cuda.h's CUaccessPolicyWindow, CUlaunchAttribute and CUlaunchConfig.
struct AccessPolicyWindow {
    void *base_ptr;
    size_t num_bytes;
    float hit_ratio;
    int hit_prop, miss_prop;
};
struct LaunchAttribute {
    int id;
    char pad[4];
    union {
        char bytes[64];
        AccessPolicyWindow window;
    } value;
};
struct LaunchConfig {
    unsigned grid[3], block[3], shared_bytes;
    void *stream;
    LaunchAttribute *attrs;
    unsigned num_attrs;
};
static_assert(sizeof(LaunchAttribute) == 72, "CUlaunchAttribute is 72 bytes");
static_assert(offsetof(LaunchConfig, stream) == 32 && offsetof(LaunchConfig, num_attrs) == 48,
              "CUlaunchConfig layout");
constexpr int kLaunchAttributeAccessPolicyWindow = 1;  // CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW
constexpr int kAccessPropertyStreaming = 1;            // CU_ACCESS_PROPERTY_STREAMING
constexpr int kAttributeMaxWindowBytes = 109;  // CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE
using LaunchKernelEx = CUresult (*)(const LaunchConfig *, void *, void **, void **);

thread_local const void *streaming_base = nullptr;
thread_local size_t streaming_bytes = 0;

bool l2_streaming_enabled() {
    static const bool enabled = [] {
        const char *env = std::getenv("SCHEDX_L2_STREAMING");
        return !(env && std::strcmp(env, "0") == 0);
    }();
    return enabled;
}

// The current context's largest window (0 if the driver has no such limit to tell),
// asked once per device.
size_t max_window_bytes() {
    struct Entries {
        CUresult (*ctx_get_device)(int *) = nullptr;
        CUresult (*device_get_attribute)(int *, int, int) = nullptr;
        std::atomic<int> bytes[kMaxDevices];  // -1: not asked yet
        Entries() {
            for (auto &b : bytes) b = -1;
            bind_symbol(libcuda(), ctx_get_device, "cuCtxGetDevice");
            bind_symbol(libcuda(), device_get_attribute, "cuDeviceGetAttribute");
        }
    };
    static Entries e;
    int dev = 0;
    if (!e.ctx_get_device || !e.device_get_attribute || e.ctx_get_device(&dev) != 0 || dev < 0 || dev >= kMaxDevices) {
        return 0;
    }
    int bytes = e.bytes[dev].load(std::memory_order_relaxed);
    if (bytes < 0) {
        if (e.device_get_attribute(&bytes, kAttributeMaxWindowBytes, dev) != 0) bytes = 0;
        e.bytes[dev].store(bytes, std::memory_order_relaxed);
    }
    return size_t(bytes);
}

// Halide never opts a kernel in above the 48 KiB of dynamic shared memory a launch gets by
// default: a launch asking more raises its kernel's limit first, once (legal in a graph capture;
// past the device's maximum, 99 KiB on sm_89 and 227 KiB on sm_90, the launch fails).
constexpr unsigned kDefaultSharedBytes = 48 * 1024;
constexpr int kFuncAttributeMaxDynamicSharedBytes = 8;  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES

CUresult opt_in_shared_bytes(void *f, unsigned shared_bytes) {
    using FuncSetAttribute = CUresult (*)(void *, int, int);
    static const FuncSetAttribute set_attribute = [] {
        FuncSetAttribute fn = nullptr;
        bind_symbol(libcuda(), fn, "cuFuncSetAttribute");
        return fn;
    }();
    static std::mutex mutex;
    static std::map<void *, unsigned> raised;  // each kernel's limit as set (kernels live as long as their modules)
    std::lock_guard<std::mutex> lock(mutex);
    auto it = raised.find(f);
    if (it != raised.end() && it->second >= shared_bytes) return 0;
    if (!set_attribute) return kErrorNotSupported;
    const CUresult r = set_attribute(f, kFuncAttributeMaxDynamicSharedBytes, int(shared_bytes));
    if (r == 0) raised[f] = shared_bytes;
    return r;
}

CUresult launch_kernel_with_window(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                   unsigned bz, unsigned shared_bytes, void *stream, void **params, void **extra) {
    static const LaunchKernelEx launch_ex = [] {
        LaunchKernelEx fn = nullptr;
        bind_symbol(libcuda(), fn, "cuLaunchKernelEx");
        return fn;
    }();
    if (shared_bytes > kDefaultSharedBytes) {
        if (const CUresult r = opt_in_shared_bytes(f, shared_bytes); r != 0) return r;
    }
    const size_t window_bytes = streaming_bytes ? std::min(streaming_bytes, max_window_bytes()) : 0;
    if (!launch_ex || window_bytes == 0) {
        return launch_kernel(f, gx, gy, gz, bx, by, bz, shared_bytes, stream, params, extra);
    }
    LaunchAttribute window{};
    window.id = kLaunchAttributeAccessPolicyWindow;
    window.value.window = {const_cast<void *>(streaming_base), window_bytes, 1.0f, kAccessPropertyStreaming,
                           kAccessPropertyStreaming};
    const LaunchConfig config{{gx, gy, gz}, {bx, by, bz}, shared_bytes, stream, &window, 1};
    return launch_ex(&config, f, params, extra);
}

}  // namespace

L2StreamingWindow::L2StreamingWindow(const void *base, size_t bytes)
    : previous_base_(streaming_base), previous_bytes_(streaming_bytes) {
    streaming_base = base;
    streaming_bytes = l2_streaming_enabled() ? bytes : 0;
}
L2StreamingWindow::~L2StreamingWindow() {
    streaming_base = previous_base_;
    streaming_bytes = previous_bytes_;
}

JitRegisterCap::JitRegisterCap(int max_registers) : previous_(jit_max_registers) {
    jit_max_registers = max_registers;
}
JitRegisterCap::~JitRegisterCap() { jit_max_registers = previous_; }

void *dlopen_first(std::initializer_list<const char *> names) {
    for (const char *name : names) {
        if (void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return lib;
    }
    return nullptr;
}

schedx_status cuda_init() {
    Driver &d = driver();
    return d.ok ? SCHEDX_OK : fail(SCHEDX_ERR_NO_CUDA, d.error);
}

schedx_status cuda_context_for(const void *ptr, const char *arg_name, void **context) {
    Driver &d = driver();
    if (!d.ok) return fail(SCHEDX_ERR_NO_CUDA, d.error);
    // One driver query for both attributes: this runs for every pointer of every call.
    unsigned mem_type = 0;
    int ordinal = -1;
    int attributes[2] = {kPointerAttributeMemoryType, kPointerAttributeDeviceOrdinal};
    void *values[2] = {&mem_type, &ordinal};
    if (d.cuPointerGetAttributes(2, attributes, values, reinterpret_cast<uintptr_t>(ptr)) != 0 ||
        mem_type != kMemoryTypeDevice || ordinal < 0 || ordinal >= kMaxDevices) {
        return fail(SCHEDX_ERR_POINTER_DEVICE, std::string(arg_name) + " is not CUDA device memory");
    }
    if (void *known = d.contexts[ordinal].load(std::memory_order_acquire)) {
        *context = known;
        return SCHEDX_OK;
    }
    std::lock_guard<std::mutex> lock(d.mutex);
    if (!d.contexts[ordinal].load()) {
        // Retained once per device for the life of the process, like the CUDA runtime does.
        int dev = 0;
        void *retained = nullptr;
        if (d.cuDeviceGet(&dev, ordinal) != 0 || d.cuDevicePrimaryCtxRetain(&retained, dev) != 0) {
            return fail(SCHEDX_ERR_NO_CUDA, "cannot retain the primary context of device " + std::to_string(ordinal));
        }
        d.sms[ordinal].store(device_sm(d, dev), std::memory_order_relaxed);
        d.contexts[ordinal].store(retained, std::memory_order_release);
    }
    *context = d.contexts[ordinal].load();
    return SCHEDX_OK;
}

namespace {

// Whether some part of the process has loaded the CUDA driver. Asked per CPU call, so it
// must be cheap: dlopen(RTLD_NOLOAD) searched the library path on every call (90 us per
// call measured here), and listing the loaded objects by name each time was still a third
// of a small CPU call (perf, build machine). The list is read again only when glibc's count
// of loads has moved since the last look. Once loaded, the driver stays loaded.
bool driver_loaded() {
    static std::atomic<bool> seen{false};
    static std::atomic<unsigned long long> adds_seen{~0ull};
    if (seen.load(std::memory_order_relaxed)) return true;
    unsigned long long adds = ~0ull;  // stays unknown if this glibc does not report it
    dl_iterate_phdr(
        [](dl_phdr_info *info, size_t size, void *out) -> int {
            if (size >= offsetof(dl_phdr_info, dlpi_adds) + sizeof(info->dlpi_adds)) {
                *static_cast<unsigned long long *>(out) = info->dlpi_adds;
            }
            return 1;  // the count is the same in every entry: the first one tells
        },
        &adds);
    if (adds != ~0ull && adds == adds_seen.load(std::memory_order_relaxed)) return false;
    auto visit = [](dl_phdr_info *info, size_t, void *) -> int {
        return info->dlpi_name && std::strstr(info->dlpi_name, "libcuda.so") ? 1 : 0;
    };
    if (dl_iterate_phdr(visit, nullptr) == 0) {
        adds_seen.store(adds, std::memory_order_relaxed);
        return false;
    }
    seen.store(true, std::memory_order_relaxed);
    return true;
}

}  // namespace

int cuda_context_sm(void *context) {
    if (!context) return 0;
    Driver &d = driver();
    for (int i = 0; i < kMaxDevices; i++) {
        if (d.contexts[i].load(std::memory_order_acquire) == context) return d.sms[i].load(std::memory_order_relaxed);
    }
    return 0;
}

std::string take_ptx_load_error() { return std::exchange(ptx_load_error, std::string()); }

bool is_known_device_pointer(const void *ptr) {
    if (!driver_loaded()) return false;
    Driver &d = driver();
    unsigned mem_type = 0;
    return d.ok &&
           d.cuPointerGetAttribute(&mem_type, kPointerAttributeMemoryType, reinterpret_cast<uintptr_t>(ptr)) == 0 &&
           mem_type == kMemoryTypeDevice;
}

schedx_status cuda_wrap(CudaCallContext *ctx, halide_buffer_t *buf, const void *ptr) {
    buf->host = nullptr;
    buf->device = 0;
    int r = halide_cuda_wrap_device_ptr(ctx, buf, reinterpret_cast<uint64_t>(ptr));
    return r == 0 ? SCHEDX_OK : fail(SCHEDX_ERR_KERNEL, "halide_cuda_wrap_device_ptr failed: " + std::to_string(r));
}

void cuda_detach(CudaCallContext *ctx, halide_buffer_t *buf) {
    if (buf->device) halide_cuda_detach_device_ptr(ctx, buf);
}

namespace {

struct StreamWorkspace {
    uint64_t scratch = 0;
    size_t bytes = 0;
    std::vector<uint64_t> retired;  // earlier, smaller scratches: see cuda_workspace
    std::mutex in_use;  // see lock_stream_workspace
    void *forked = nullptr;  // see cuda_fork_side_streams
    void *side[kMaxSideStreams] = {}, *joined[kMaxSideStreams] = {};
};
constexpr unsigned kStreamNonBlocking = 1;   // CU_STREAM_NON_BLOCKING
constexpr unsigned kEventDisableTiming = 2;  // CU_EVENT_DISABLE_TIMING
std::mutex workspaces_mutex;  // guards `workspaces` and each entry's scratch and bytes
std::map<std::pair<void *, void *>, StreamWorkspace> workspaces;

// The pair's entry, made on first use; map entries never move, so the pointer stays valid.
StreamWorkspace *workspace_of(void *context, void *stream) {
    std::lock_guard<std::mutex> lock(workspaces_mutex);
    return &workspaces[{context, stream}];
}

}  // namespace

std::unique_lock<std::mutex> lock_stream_workspace(void *context, void *stream) {
    return std::unique_lock<std::mutex>(workspace_of(context, stream)->in_use);
}

CudaContextScope::CudaContextScope(void *context) : capture_mode_(kCaptureModeRelaxed) {
    Driver &d = driver();
    ok_ = d.ok && d.cuCtxPushCurrent(context) == 0;
    if (ok_) d.cuThreadExchangeStreamCaptureMode(&capture_mode_);
}

CudaContextScope::~CudaContextScope() {
    if (!ok_) return;
    Driver &d = driver();
    d.cuThreadExchangeStreamCaptureMode(&capture_mode_);
    void *popped = nullptr;
    d.cuCtxPopCurrent(&popped);
}

schedx_status cuda_workspace(void *context, void *stream, size_t bytes, void **ptr) {
    Driver &d = driver();
    if (!d.ok) return fail(SCHEDX_ERR_NO_CUDA, d.error);
    std::lock_guard<std::mutex> lock(workspaces_mutex);
    StreamWorkspace &w = workspaces[{context, stream}];
    if (w.bytes < bytes) {
        const size_t grown_bytes = std::max(bytes, 2 * w.bytes);
        uint64_t grown = 0;
        {
            CudaContextScope scope(context);
            if (!scope.ok()) return fail(SCHEDX_ERR_KERNEL, "cannot make the context current");
            if (d.cuMemAlloc(&grown, grown_bytes) != 0) {
                return fail(SCHEDX_ERR_KERNEL, "cannot allocate a " + std::to_string(grown_bytes) + "-byte workspace");
            }
        }
        // The old scratch is retired, not freed: queued work or a captured graph may still
        // use it, and freeing it safely would need a synchronization (illegal in a capture).
        // Doubling bounds what is retired by the size of the current scratch.
        if (w.scratch) w.retired.push_back(w.scratch);
        w.scratch = grown;
        w.bytes = grown_bytes;
    }
    *ptr = reinterpret_cast<void *>(w.scratch);
    return SCHEDX_OK;
}

schedx_status cuda_fork_side_streams(void *context, void *stream, int count, void **sides) {
    Driver &d = driver();
    if (!d.ok) return fail(SCHEDX_ERR_NO_CUDA, d.error);
    if (count < 1 || count > kMaxSideStreams) return fail(SCHEDX_ERR_KERNEL, "side stream count out of range");
    CudaContextScope scope(context);
    if (!scope.ok()) return fail(SCHEDX_ERR_KERNEL, "cannot make the context current");
    StreamWorkspace *w = workspace_of(context, stream);
    // The side streams' launches are a tile wide, one tile's latency each (H100, 12000x6000:
    // 6.3-7.0 us beside 103 us of whole tiles): the greatest priority lets their blocks take SM
    // slots ahead of the whole tiles' waiting ones, 4.5% less time than the default priority
    // (ragged_side_priority_2026-12-05_h100_65c7b39.md); one stream each runs them at once.
    int least = 0, greatest = 0;
    if (!w->forked && d.cuEventCreate(&w->forked, kEventDisableTiming) != 0) {
        return fail(SCHEDX_ERR_KERNEL, "cannot create the side streams' fork event");
    }
    for (int i = 0; i < count; i++) {
        // The event first: a stream is only kept once its event exists (nothing leaks on failure).
        if ((!w->joined[i] && d.cuEventCreate(&w->joined[i], kEventDisableTiming) != 0) ||
            (!w->side[i] && (d.cuCtxGetStreamPriorityRange(&least, &greatest) != 0 ||
                             d.cuStreamCreateWithPriority(&w->side[i], kStreamNonBlocking, greatest) != 0))) {
            w->side[i] = nullptr;
            return fail(SCHEDX_ERR_KERNEL, "cannot create a side stream and its event");
        }
    }
    if (d.cuEventRecord(w->forked, stream) != 0) {
        return fail(SCHEDX_ERR_KERNEL, "cannot order the side streams after the caller's stream");
    }
    for (int i = 0; i < count; i++) {
        if (d.cuStreamWaitEvent(w->side[i], w->forked, 0) != 0) {
            return fail(SCHEDX_ERR_KERNEL, "cannot order the side streams after the caller's stream");
        }
        sides[i] = w->side[i];
    }
    return SCHEDX_OK;
}

schedx_status cuda_join_side_streams(void *context, void *stream, int count) {
    Driver &d = driver();
    if (!d.ok) return fail(SCHEDX_ERR_NO_CUDA, d.error);
    if (count < 1 || count > kMaxSideStreams) return fail(SCHEDX_ERR_KERNEL, "side stream count out of range");
    CudaContextScope scope(context);
    if (!scope.ok()) return fail(SCHEDX_ERR_KERNEL, "cannot make the context current");
    StreamWorkspace *w = workspace_of(context, stream);
    for (int i = 0; i < count; i++) {
        if (!w->side[i] || d.cuEventRecord(w->joined[i], w->side[i]) != 0 ||
            d.cuStreamWaitEvent(stream, w->joined[i], 0) != 0) {
            return fail(SCHEDX_ERR_KERNEL, "cannot order the caller's stream after the side streams");
        }
    }
    return SCHEDX_OK;
}

schedx_status cuda_fill_words(void *context, void *stream, void *ptr, size_t words, uint32_t value) {
    Driver &d = driver();
    if (!d.ok) return fail(SCHEDX_ERR_NO_CUDA, d.error);
    CudaContextScope scope(context);
    if (!scope.ok()) return fail(SCHEDX_ERR_KERNEL, "cannot make the context current");
    // A memset, not a stream memory operation (cuStreamWriteValue32): with the latter the
    // fused-amax cast took 78.4 instead of 76.6 us at 8192^2 on the H200.
    const CUresult r = d.cuMemsetD32Async(reinterpret_cast<uint64_t>(ptr), value, words, stream);
    return r == 0 ? SCHEDX_OK : fail(SCHEDX_ERR_KERNEL, "cannot set words on the stream (CUDA error " + std::to_string(r) + ")");
}

std::string cuda_device_name(int ordinal) {
    Driver &d = driver();
    if (!d.ok) return "";
    int dev = 0;
    char name[256] = {};
    if (d.cuDeviceGet(&dev, ordinal) != 0 || d.cuDeviceGetName(name, sizeof(name), dev) != 0) return "";
    return name;
}

int cuda_driver_version() {
    Driver &d = driver();
    int v = 0;
    return d.ok && d.cuDriverGetVersion(&v) == 0 ? v : 0;
}

}  // namespace schedx

// Replaces the Halide runtime's weak definition: the same lookup in the driver library,
// except that cuModuleLoadDataEx goes through the register cap and cuLaunchKernel through
// the L2 window above.
extern "C" void *halide_cuda_get_symbol(void *, const char *name) {
    void *lib = schedx::libcuda();
    if (!lib) return nullptr;
    void *symbol = dlsym(lib, name);
    if (symbol && std::strcmp(name, "cuModuleLoadDataEx") == 0) {
        schedx::module_load_data_ex = reinterpret_cast<schedx::ModuleLoadDataEx>(symbol);
        return reinterpret_cast<void *>(&schedx::module_load_data_ex_capped);
    }
    if (symbol && std::strcmp(name, "cuLaunchKernel") == 0) {
        schedx::launch_kernel = reinterpret_cast<schedx::LaunchKernel>(symbol);
        return reinterpret_cast<void *>(&schedx::launch_kernel_with_window);
    }
    return symbol;
}
