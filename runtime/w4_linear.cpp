// schedx_w4_linear: validation, variant eligibility and the call (one Halide pipeline).
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_interop.h"
#include "dispatch.h"
#include "pipeline_call.h"
#include "registry.h"
#include "status.h"
#include "validate.h"
#include "w4_linear_call.h"
#include "w4_linear_layout.h"

namespace schedx {
namespace {

const char *half_name(schedx_dtype t) {
    switch (t) {
    case SCHEDX_BF16: return "bf16";
    case SCHEDX_FP16: return "fp16";
    default: return nullptr;
    }
}

enum class Family { cpu, gemv, general };

Family family_of(const Variant &v) {
    const std::string_view s = v.param("schedule");
    return s == "cpu" ? Family::cpu : s == "cuda_gemv" ? Family::gemv : Family::general;
}

// Hard requirements only, so that exploration measures every candidate: the GEMV's 16-byte
// vectors (w4_linear_layout.h) and some K, the CPU tile's rows of x.
bool can_run(const Variant &v, const W4LinearCall &c) {
    switch (family_of(v)) {
    case Family::gemv:
        return c.k > 0 && aligned16(c.x) && aligned16(c.w) && c.ldx % 8 == 0 && c.ldw % 4 == 0 &&
               c.k % w4::kVectorElems == 0;
    case Family::cpu: return c.m >= v.param_int("batch", 1);
    case Family::general: return true;
    }
    return true;
}

// Untuned: the GEMV up to M = 16 (one pass over W per row of x; nothing faster is built for
// small batches yet), the general variant past it. Not yet timed on a GPU.
int untuned_rank(const Variant &v, const W4LinearCall &c) { return family_of(v) == Family::gemv && c.m > 16 ? 1 : 0; }

}  // namespace

void bind_w4_linear(PipelineCall &call, const W4LinearCall &c, const void *dummy) {
    const int64_t groups = c.k / c.group_size;
    const void *scales = groups ? c.scales : dummy;
    call.bind_matrix("x", c.k ? c.x : dummy, c.m, c.k, c.ldx, 2);
    call.bind_matrix("w", c.k ? static_cast<const void *>(c.w) : dummy, c.n, c.k / w4::kElemsPerWord, c.ldw, 4);
    call.bind_matrix("scales", scales, c.n, groups, groups, 2);
    call.bind_matrix("zeros", c.zeros && groups ? c.zeros : scales, c.n, groups, groups, 2);
    call.bind_vector("bias", c.bias ? c.bias : groups ? c.scales : dummy, c.n, 2);
    call.bind_int("group_size", int32_t(c.group_size));
    call.bind_int("has_zeros", c.zeros ? 1 : 0);
    call.bind_int("has_bias", c.bias ? 1 : 0);
    call.bind_matrix("y", c.y, c.m, c.n, c.ldy, 2);
}

}  // namespace schedx

extern "C" schedx_status schedx_w4_linear(const void *x, int64_t m, int64_t k, int64_t ldx, schedx_dtype x_dtype,
                                          const uint32_t *w, int64_t n, int64_t ldw, int64_t group_size,
                                          const void *scales, const void *zeros, schedx_dtype scales_dtype,
                                          const void *bias, void *y, int64_t ldy, schedx_device device, void *stream) {
    using namespace schedx;
    clear_error();
    Device dev;
    schedx_status s;
    if ((s = check_device(device, &dev)) || (s = check_not_negative("m", m)) || (s = check_not_negative("k", k)) ||
        (s = check_not_negative("n", n))) {
        return s;
    }
    if (!w4::valid_group_size(group_size)) {
        return fail(SCHEDX_ERR_BAD_SIZE, "group_size " + std::to_string(group_size) + " is not 32, 64 or 128");
    }
    if (k % group_size != 0) {
        return fail(SCHEDX_ERR_BAD_SIZE,
                    "k (" + std::to_string(k) + ") is not a multiple of group_size (" + std::to_string(group_size) + ")");
    }
    const int64_t groups = k / group_size, words = k / w4::kElemsPerWord;
    // Empty operands are valid, as in PyTorch; a pointer to an empty one may be NULL.
    if ((m && k && (s = check_not_null("x", x))) || (n && k && (s = check_not_null("w", w))) ||
        (n && k && (s = check_not_null("scales", scales))) || (m && n && (s = check_not_null("y", y)))) {
        return s;
    }
    const char *x_type = half_name(x_dtype), *scale_type = half_name(scales_dtype);
    if (!x_type) {
        return fail(SCHEDX_ERR_UNSUPPORTED_DTYPE,
                    "x_dtype " + std::to_string(static_cast<int>(x_dtype)) + " is not bf16 or fp16");
    }
    if (!scale_type) {
        return fail(SCHEDX_ERR_UNSUPPORTED_DTYPE,
                    "scales_dtype " + std::to_string(static_cast<int>(scales_dtype)) + " is not bf16 or fp16");
    }
    if ((s = check_leading_dim("ldx", ldx, "k", k)) || (s = check_leading_dim("ldw", ldw, "k / 8", words)) ||
        (s = check_leading_dim("ldy", ldy, "n", n))) {
        return s;
    }
    std::vector<Span> spans{{"x", x, m, k, ldx, 2, false},
                            {"w", w, n, words, ldw, 4, false},
                            {"scales", scales, n, groups, groups, 2, false},
                            {"y", y, m, n, ldy, 2, true}};
    if (zeros) spans.push_back({"zeros", zeros, n, groups, groups, 2, false});
    if (bias) spans.push_back({"bias", bias, 1, n, n, 2, false});
    void *ctx = nullptr;
    if ((s = check_spans(spans, dev, &ctx))) return s;
    if (m == 0 || n == 0) return SCHEDX_OK;  // y is empty

    const W4LinearCall c{x, m, k, ldx, w, n, ldw, group_size, scales, zeros, bias, y, ldy};
    const Workload wl{"w4_linear",
                      std::string(x_type) + "*int4g" + std::to_string(group_size) + (zeros ? "z*" : "*") + scale_type +
                          (bias ? "+bias" : "") + "->" + x_type,
                      dev,
                      {m, n, k}};
    const std::string kind = std::string(x_type) + "*" + scale_type;
    const std::vector<const Variant *> &candidates =
        schedx::candidates(wl.op, dev, kind, [&](const Variant &v) {
            return v.param("x_type") == x_type && v.param("scale_type") == scale_type;
        });
    const RunKey key{m, n, k, ldx, ldw, ldy, misalignment(x), misalignment(w), group_size, 0, 0, 0};
    const auto runnable = runnable_variants(
        candidates, key, cuda_context_sm(ctx), [&](const Variant &v) { return can_run(v, c); },
        [&](const Variant &v) { return untuned_rank(v, c); });
    const Variant *v = nullptr;
    if ((s = choose_variant(wl, candidates, runnable, &v))) return s;

    // K = 0 leaves no scales to stand in for absent zero points and bias: N zero halves do,
    // and every empty operand is bound to them (a buffer without memory would be a bounds query).
    std::vector<uint16_t> host_zeros;
    void *dummy = nullptr;
    std::unique_lock<std::mutex> workspace_lock;
    if (k == 0) {
        if (dev == Device::cpu) {
            host_zeros.assign(size_t(n), 0);
            dummy = host_zeros.data();
        } else {
            workspace_lock = lock_stream_workspace(ctx, stream);
            if ((s = cuda_workspace(ctx, stream, size_t(n + 2) * 2, &dummy)) ||
                (s = cuda_fill_words(ctx, stream, dummy, size_t(n + 2) / 2))) {
                return s;
            }
        }
    }
    PipelineCall call(*v, stream, ctx);
    bind_w4_linear(call, c, dummy);
    return call.run();
}
