// schedx_abs_max: max |x| for current (just-in-time) fp8 scaling, by the abs_max variants.
#include "abs_max.h"

#include "abs_max_layout.h"

#include <mutex>
#include <string>
#include <vector>

#include "cuda_interop.h"
#include "dispatch.h"
#include "pipeline_call.h"
#include "status.h"
#include "validate.h"

namespace schedx {
namespace {

// Word variants read 16-byte vectors: x and its rows 16-byte aligned, rows whole vectors.
bool can_run(const Variant &v, const void *x, int64_t k, int64_t ldx, int elem_bytes) {
    if (v.param("schedule") != "cuda") return true;
    constexpr int vec = abs_max_layout::kWordVectorBytes;
    return aligned_to(x, vec) && (ldx * elem_bytes) % vec == 0 && (k * elem_bytes) % vec == 0;
}

}  // namespace

int64_t abs_max_blocks(const Variant &v, int64_t m, int64_t k, int elem_bytes) {
    // A block covers threads_x * load_words units of its input buffer (32-bit words for the
    // word variants, elements otherwise) by threads_y * rows_per_thread rows.
    constexpr abs_max_layout::Block d{};  // the generator's defaults
    const int64_t block_units = int64_t(v.param_int("threads_x", d.threads_x)) * v.param_int("load_words", d.load_words);
    const int64_t block_rows = int64_t(v.param_int("threads_y", d.threads_y)) * v.param_int("rows_per_thread", d.rows_per_thread);
    const int64_t units = v.param("schedule") == "cuda" ? k * elem_bytes / 4 : k;
    return (units + block_units - 1) / block_units * ((m + block_rows - 1) / block_rows);
}

schedx_status run_abs_max(Device device, const char *in_type, const void *x, int64_t m, int64_t k, int64_t ldx,
                          int elem_bytes, float *amax, void *stream, void *ctx) {
    const Workload w{"abs_max", in_type, device, {m, k}};
    // Looked up once per dtype and device (candidates memoises by key), not per call.
    const auto &found =
        candidates("abs_max", device, in_type, [&](const Variant &v) { return v.param("in_type") == in_type; });
    const RunKey key{m, k, ldx, elem_bytes, aligned16(x)};
    const auto runnable = runnable_variants(found, key, cuda_context_sm(ctx),
                                            [&](const Variant &v) { return can_run(v, x, k, ldx, elem_bytes); });
    const Variant *v = nullptr;
    schedx_status s;
    if ((s = choose_variant(w, found, runnable, &v))) return s;
    PipelineCall call(*v, stream, ctx);
    call.bind_matrix("input", x, m, k, ldx, elem_bytes);
    if (device == Device::cpu) {
        call.bind_scalar_buffer("amax", amax);
        return call.run();
    }
    // Each block takes its maximum into amax, zeroed on the stream first, by an atomic, and
    // writes one word of the stream's workspace; the lock keeps another thread's call on this
    // stream from reallocating it.
    const int64_t blocks = abs_max_blocks(*v, m, k, elem_bytes);
    void *sink = nullptr;
    std::unique_lock<std::mutex> workspace_lock = lock_stream_workspace(ctx, stream);
    if ((s = cuda_workspace(ctx, stream, size_t(blocks) * 4, &sink))) return s;
    call.bind_vector("block_sink", sink, blocks, 4);
    call.bind_address("amax_address", amax);
    if ((s = cuda_fill_words(ctx, stream, amax))) return s;
    return call.run();
}

}  // namespace schedx

extern "C" schedx_status schedx_abs_max(const void *x, int64_t m, int64_t k, int64_t ldx, schedx_dtype x_dtype,
                                        float *amax, schedx_device device, void *stream) {
    using namespace schedx;
    clear_error();
    Device dev;
    schedx_status s;
    if ((s = check_device(device, &dev)) || (s = check_not_null("amax", amax))) return s;
    if ((s = check_not_negative("m", m)) || (s = check_not_negative("k", k))) return s;
    // An empty tensor may have no storage (PyTorch's data_ptr() is then NULL).
    if (m > 0 && k > 0 && (s = check_not_null("x", x))) return s;
    const char *in_type = x_dtype == SCHEDX_BF16 ? "bf16" : x_dtype == SCHEDX_FP16 ? "fp16"
                        : x_dtype == SCHEDX_FP32 ? "fp32" : nullptr;
    if (!in_type) {
        return fail(SCHEDX_ERR_UNSUPPORTED_DTYPE,
                    "x_dtype " + std::to_string(static_cast<int>(x_dtype)) + " is not bf16, fp16 or fp32");
    }
    if ((s = check_leading_dim("ldx", ldx, "k", k))) return s;
    const int elem_bytes = x_dtype == SCHEDX_FP32 ? 4 : 2;
    std::vector<Span> spans{{"x", x, m, k, ldx, elem_bytes, false}, {"amax", amax, 1, 1, 1, 4, true}};
    void *ctx = nullptr;
    // An empty x: amax is 0, as torch.amax of an empty tensor's |x| with initial 0.
    if (m == 0 || k == 0) {
        spans.erase(spans.begin());
        if ((s = check_spans(spans, dev, &ctx))) return s;
        if (dev == Device::cpu) {
            *amax = 0.0f;
            return SCHEDX_OK;
        }
        return cuda_fill_words(ctx, stream, amax);
    }
    if ((s = check_spans(spans, dev, &ctx))) return s;
    return run_abs_max(dev, in_type, x, m, k, ldx, elem_bytes, amax, stream, ctx);
}
