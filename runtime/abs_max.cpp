// schedx_abs_max: max |x| for current (just-in-time) fp8 scaling, by the abs_max variants.
#include <mutex>
#include <string>
#include <vector>

#include "cuda_interop.h"
#include "dispatch.h"
#include "pipeline_call.h"
#include "registry.h"
#include "status.h"
#include "validate.h"

extern "C" schedx_status schedx_abs_max(const void *x, int64_t m, int64_t k, int64_t ldx, schedx_dtype x_dtype,
                                        float *amax, schedx_device device, void *stream) {
    using namespace schedx;
    clear_error();
    Device dev;
    schedx_status s;
    if ((s = check_device(device, &dev)) || (s = check_not_null("amax", amax))) return s;
    if (m < 0 || k < 0) return fail(SCHEDX_ERR_BAD_SIZE, "m and k must not be negative");
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
    const auto &found =
        candidates("abs_max", dev, in_type, [&](const Variant &v) { return v.param("in_type") == in_type; });
    if (found.empty()) return fail(SCHEDX_ERR_NO_VARIANT, std::string("no abs_max variant for ") + in_type);
    // The abs_max pipeline also writes 1/scale (the cast's scale_inv), which this entry has
    // no use for: scale and scale_inv live in scratch (CPU: here; CUDA: the stream's).
    float host_scratch[2] = {1.0f, 1.0f};
    float *scratch = host_scratch;
    std::unique_lock<std::mutex> workspace_lock;
    if (dev == Device::cuda) {
        void *p = nullptr;
        workspace_lock = lock_stream_workspace(ctx, stream);
        if ((s = cuda_workspace(ctx, stream, 2 * sizeof(float), &p))) return s;
        scratch = static_cast<float *>(p);
    }
    PipelineCall call(*found.front(), stream, ctx);
    call.bind_matrix("input", x, m, k, ldx, elem_bytes);
    call.bind_scalar_buffer("scale", scratch);
    call.bind_scalar_buffer("amax", amax);
    call.bind_scalar_buffer("scale_inv", scratch + 1);
    return call.run();
}
