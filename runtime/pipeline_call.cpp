#include "pipeline_call.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <mutex>

#include "status.h"

namespace schedx {
namespace {

thread_local std::string halide_message;
std::atomic<int> refused_targets{0};

// A CPU call whose operands hold fewer bytes runs its parallel loops on the calling thread, as
// PyTorch's grain size keeps small ops: AVX2 VM, w8_linear M = 1, 256 x 256 (64 KiB of W), 11-12 us
// so, idle or beside a busy core, against 23.1 us on two threads idle and 31.6 beside a busy core;
// at 1024 x 256 two threads win when idle (18.3 against 27.5 us; cpu_small_calls record).
constexpr uint64_t kSerialBytes = 256 * 1024;
thread_local bool run_serially = false;

int do_par_for(void *user_context, halide_task_t task, int min, int size, uint8_t *closure);

// Any AVX-512 feature marks a target above the baseline (AVX2).
int can_use_baseline_only(int count, const uint64_t *features) {
    for (int f = halide_target_feature_avx512; f <= halide_target_feature_avx512_sapphirerapids; f++) {
        if (f / 64 < count && (features[f / 64] >> (f % 64)) & 1) {
            refused_targets++;
            return 0;
        }
    }
    return halide_default_can_use_target_features(count, features);
}

void install_runtime_hooks() {
    static std::once_flag once;
    std::call_once(once, [] {
        // Halide's runtime reports through this hook; keep the text for schedx_last_error.
        halide_set_error_handler([](void *, const char *msg) { halide_message = msg; });
        halide_set_custom_do_par_for(do_par_for);
        const char *baseline = std::getenv("SCHEDX_CPU_BASELINE");
        if (baseline && std::strcmp(baseline, "1") == 0) halide_set_custom_can_use_target_features(can_use_baseline_only);
    });
}

}  // namespace

PipelineCall::PipelineCall(const Variant &variant, void *stream, void *context) : variant_(variant) {
    install_runtime_hooks();
    cuda_.stream = stream;
    cuda_.context = context;
    args_.resize(variant.metadata->num_arguments);
    for (int i = 0; i < variant.metadata->num_arguments; i++) {
        args_[i].name = variant.metadata->arguments[i].name;
        // From the metadata, not from binding: an unbound buffer must fail in run(), not
        // reach the pipeline as a null buffer (Halide reads that as a bounds query and
        // returns success without computing anything).
        args_[i].is_buffer = variant.metadata->arguments[i].kind != halide_argument_kind_input_scalar;
    }
}

PipelineCall::~PipelineCall() {
    if (variant_.device != Device::cuda) return;
    for (Arg &a : args_) {
        if (a.is_buffer) cuda_detach(&cuda_, &a.buf);
    }
}

PipelineCall::Arg *PipelineCall::slot(const char *name) {
    const int i = variant_.argument_index(name);
    return i < 0 ? nullptr : &args_[i];
}

void PipelineCall::bind_matrix(const char *name, const void *ptr, int64_t rows, int64_t cols, int64_t ld,
                               int elem_bytes) {
    Arg *slot_ptr = slot(name);
    if (!slot_ptr) return;
    Arg &a = *slot_ptr;
    const halide_filter_argument_t *meta = &variant_.metadata->arguments[slot_ptr - args_.data()];
    const int word_bytes = (meta->type.bits + 7) / 8;
    const int64_t per_word = word_bytes / elem_bytes;  // 1, or 2/4 for word-typed buffers
    a.ptr = ptr;
    a.buf.type = meta->type;
    a.buf.dimensions = 2;
    a.buf.dim = a.dims;
    // An empty matrix spans no memory: the caller's leading dimension bounds nothing there (the
    // argument checks skip it) and may exceed what a Halide buffer's 32-bit stride holds.
    const int64_t pitch = rows == 0 || cols == 0 ? cols : ld;
    a.dims[0] = halide_dimension_t(0, static_cast<int32_t>(cols / per_word), 1);
    a.dims[1] = halide_dimension_t(0, static_cast<int32_t>(rows), static_cast<int32_t>(pitch / per_word));
}

void PipelineCall::bind_vector(const char *name, const void *ptr, int64_t n, int elem_bytes) {
    bind_matrix(name, ptr, 1, n, n, elem_bytes);
    if (Arg *a = slot(name)) a->buf.dimensions = 1;
}

void PipelineCall::bind_scalar_buffer(const char *name, const void *ptr) {
    Arg *slot_ptr = slot(name);
    if (!slot_ptr) return;
    const halide_filter_argument_t &meta = variant_.metadata->arguments[slot_ptr - args_.data()];
    if (meta.dimensions != 0) return;  // not a one-element buffer: run() reports it unbound
    Arg &a = *slot_ptr;
    a.ptr = ptr;
    a.buf.type = meta.type;
    a.buf.dimensions = 0;
}

void PipelineCall::bind_int(const char *name, int32_t value) {
    if (Arg *a = slot(name)) a->scalar.i32 = value;
}

void PipelineCall::bind_address(const char *name, const void *ptr) {
    if (Arg *a = slot(name)) a->scalar.u64 = reinterpret_cast<uint64_t>(ptr);
}

uint64_t PipelineCall::operand_bytes() const {
    uint64_t bytes = 0;
    for (const Arg &a : args_) {
        if (!a.is_buffer) continue;
        uint64_t b = (a.buf.type.bits + 7) / 8;
        for (int d = 0; d < a.buf.dimensions; d++) b *= uint64_t(a.buf.dim[d].extent);
        bytes += b;
    }
    return bytes;
}

schedx_status PipelineCall::run() {
    std::vector<void *> argv(args_.size());
    void *user_context = &cuda_;
    for (size_t i = 0; i < args_.size(); i++) {
        Arg &a = args_[i];
        if (std::strcmp(a.name, "__user_context") == 0) {
            argv[i] = &user_context;
        } else if (a.is_buffer) {
            if (!a.ptr) {
                return fail(SCHEDX_ERR_NULL_POINTER, variant_.name + ": argument " + a.name + " not bound");
            }
            if (variant_.device == Device::cuda) {
                if (!a.buf.device) {
                    if (!cuda_.context) {
                        schedx_status s = cuda_context_for(a.ptr, a.name, &cuda_.context);
                        if (s != SCHEDX_OK) return s;
                    }
                    schedx_status s = cuda_wrap(&cuda_, &a.buf, a.ptr);
                    if (s != SCHEDX_OK) return s;
                }
            } else {
                a.buf.host = static_cast<uint8_t *>(const_cast<void *>(a.ptr));
            }
            argv[i] = &a.buf;
        } else {
            const halide_type_t type = variant_.metadata->arguments[i].type;
            if (type.code == halide_type_uint && type.bits == 64 && a.scalar.u64 == 0) {
                return fail(SCHEDX_ERR_NULL_POINTER, variant_.name + ": address " + a.name + " not bound");
            }
            argv[i] = &a.scalar;
        }
    }
    halide_message.clear();
    if (variant_.device == Device::cuda) take_ptx_load_error();  // a reason left by an earlier load is not this call's
    const JitRegisterCap cap(variant_.jit_max_registers);
    const bool serial_before = run_serially;
    run_serially = serial_before || (variant_.device == Device::cpu && operand_bytes() < kSerialBytes);
    int r = variant_.argv(argv.data());
    run_serially = serial_before;
    if (r != 0) {
        const std::string ptx_error = variant_.device == Device::cuda ? take_ptx_load_error() : std::string();
        return fail(SCHEDX_ERR_KERNEL, variant_.name + " failed (Halide error " + std::to_string(r) + "): " +
                                           (halide_message.empty() ? "no message" : halide_message) +
                                           (ptx_error.empty() ? "" : "; " + ptx_error));
    }
    return SCHEDX_OK;
}

}  // namespace schedx

namespace schedx {

bool PipelineCall::bounds_fit() {
    // A CUDA pipeline loads its module before answering, so it needs the pointers' context.
    for (size_t i = 0; variant_.device == Device::cuda && !cuda_.context && i < args_.size(); i++) {
        if (args_[i].is_buffer && args_[i].ptr &&
            cuda_context_for(args_[i].ptr, args_[i].name, &cuda_.context) != SCHEDX_OK) {
            return false;
        }
    }
    // Query copies: no host or device memory makes each buffer a bounds query.
    std::vector<halide_buffer_t> query(args_.size());
    std::vector<halide_dimension_t> dims(2 * args_.size());
    std::vector<void *> argv(args_.size());
    void *user_context = &cuda_;
    for (size_t i = 0; i < args_.size(); i++) {
        const Arg &a = args_[i];
        if (std::strcmp(a.name, "__user_context") == 0) {
            argv[i] = &user_context;
        } else if (a.is_buffer) {
            query[i] = a.buf;
            query[i].host = nullptr;
            query[i].device = 0;
            query[i].device_interface = nullptr;
            query[i].dim = &dims[2 * i];
            for (int d = 0; d < a.buf.dimensions; d++) query[i].dim[d] = a.dims[d];
            argv[i] = &query[i];
        } else {
            argv[i] = const_cast<void *>(static_cast<const void *>(&a.scalar));
        }
    }
    const JitRegisterCap cap(variant_.jit_max_registers);  // the bounds query may load the module
    bool fits = variant_.argv(argv.data()) == 0;
    for (size_t i = 0; fits && i < args_.size(); i++) {
        for (int d = 0; args_[i].is_buffer && d < args_[i].buf.dimensions; d++) {
            const halide_dimension_t &need = query[i].dim[d], &have = args_[i].dims[d];
            fits = fits && need.min >= have.min && need.min + need.extent <= have.min + have.extent;
        }
    }
    return fits;
}

int cpu_targets_refused() { return refused_targets.load(); }

int cpu_vector_registers() {
    // The question Halide's wrapper asks before running a variant's AVX-512 build (through
    // the SCHEDX_CPU_BASELINE hook where it is installed), asked once.
    static const int registers = [] {
        install_runtime_hooks();
        uint64_t features[(halide_target_feature_end + 63) / 64] = {};
        for (int f : {halide_target_feature_avx512, halide_target_feature_avx512_skylake}) {
            features[f / 64] |= uint64_t(1) << (f % 64);
        }
        return halide_can_use_target_features(int(std::size(features)), features) ? 32 : 16;
    }();
    return registers;
}

}  // namespace schedx

namespace {

std::atomic<schedx_parallel_for_fn> caller_parallel_for{nullptr};

// One Halide parallel loop on the caller's pool: tasks in order within each chunk, the
// first failure kept and the rest of the tasks skipped.
struct ParallelTasks {
    void *user_context;
    halide_task_t task;
    uint8_t *closure;
    std::atomic<int> result{0};
};

void run_tasks(int64_t begin, int64_t end, void *ctx) {
    auto *t = static_cast<ParallelTasks *>(ctx);
    for (int64_t i = begin; i < end && t->result.load(std::memory_order_relaxed) == 0; i++) {
        int failed = 0;
        if (const int r = t->task(t->user_context, int(i), t->closure)) t->result.compare_exchange_strong(failed, r);
    }
}

}  // namespace

namespace schedx {
namespace {

// Every Halide parallel loop: on the calling thread for a small call (kSerialBytes), else on the
// caller's pool where one is set (schedx_set_parallel_for), else on Halide's own.
int do_par_for(void *user_context, halide_task_t task, int min, int size, uint8_t *closure) {
    if (run_serially) {
        for (int i = min; i < min + size; i++) {
            if (const int r = task(user_context, i, closure)) return r;
        }
        return 0;
    }
    if (const schedx_parallel_for_fn parallel_for = caller_parallel_for.load()) {
        ParallelTasks t{user_context, task, closure};
        if (parallel_for(min, int64_t(min) + size, 1, run_tasks, &t) != 0) return halide_error_code_generic_error;
        return t.result.load();
    }
    return halide_default_do_par_for(user_context, task, min, size, closure);
}

}  // namespace
}  // namespace schedx

extern "C" void schedx_set_parallel_for(schedx_parallel_for_fn parallel_for) {
    caller_parallel_for.store(parallel_for);
    halide_set_custom_do_par_for(schedx::do_par_for);
}

extern "C" schedx_status schedx_set_num_threads(int n) {
    using namespace schedx;
    clear_error();
    if (n < 1) return fail(SCHEDX_ERR_BAD_SIZE, "n is " + std::to_string(n) + ", not a thread count of at least 1");
    // Halide's pool takes the lock on every set: skip it when the count is unchanged.
    static std::atomic<int> current{0};
    if (current.exchange(n) != n) halide_set_num_threads(n);
    return SCHEDX_OK;
}
