// schedx_w4_linear: validation, variant eligibility and the call (one Halide pipeline, or for
// large M dequantize + cuBLAS's GEMM (+ a bias epilogue)).
#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cublas_gemm.h"
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

enum class Family { cpu, gemv, smallbatch, mma, general, dequantize };

Family family_of(const Variant &v) {
    if (v.param("stage") == "dequantize") return Family::dequantize;
    const std::string_view s = v.param("schedule");
    return s == "cpu"               ? Family::cpu
           : s == "cuda_gemv"       ? Family::gemv
           : s == "cuda_smallbatch" ? Family::smallbatch
           : s == "cuda_mma"        ? Family::mma
                                    : Family::general;
}

// Hard requirements only, so that exploration measures every candidate: the lane and mma
// kernels' 16-byte vectors (w4_linear_layout.h) and some K, the mma kernels' group of at least
// one chunk, the CPU tile's rows of x; the dequantize path's workspace of N x K elements within
// Halide's 32-bit indexing (it takes any row pitch).
bool can_run(const Variant &v, const W4LinearCall &c) {
    const bool vectors = c.k > 0 && aligned16(c.x) && aligned16(c.w) && c.ldx % 8 == 0 && c.ldw % 4 == 0 &&
                         c.k % w4::kVectorElems == 0;
    switch (family_of(v)) {
    case Family::gemv:
    case Family::smallbatch: return vectors;
    case Family::mma: return vectors && c.group_size >= w4::mma_chunk_elems(v.param_int("load_words", 1));
    case Family::cpu: return c.m >= v.param_int("batch", 1);
    case Family::dequantize: return c.k > 0 && c.n * c.k <= INT32_MAX;
    case Family::general: return true;
    }
    return true;
}

// Untuned order, families by M (H100, dirty L2, bench/results/w4_mma_2026-12-07_h100_6d782f7.md):
// M = 1 the GEMV (25.6 us at N = K = 8192, 79% of a read; the batch-8 tensor-core kernel 31.5);
// M = 2 the small-batch kernel (28.7 against 32.1); M = 3..64 the tensor cores (M = 4: 31.8
// against b4_r4's 39.2; M = 64: 103 against dequantize + cuBLAS's 143); past 64 dequantize +
// cuBLAS; the general variant last.
int family_tier(Family f, int64_t m) {
    static constexpr Family by_m[5][5] = {
        {Family::gemv, Family::smallbatch, Family::mma, Family::dequantize, Family::general},  // M = 1
        {Family::smallbatch, Family::mma, Family::gemv, Family::dequantize, Family::general},  // M = 2
        {Family::mma, Family::smallbatch, Family::dequantize, Family::gemv, Family::general},  // M = 3..16
        {Family::mma, Family::dequantize, Family::smallbatch, Family::gemv, Family::general},  // M = 17..64
        {Family::dequantize, Family::mma, Family::smallbatch, Family::gemv, Family::general},  // M > 64
    };
    const int row = m == 1 ? 0 : m == 2 ? 1 : m <= 16 ? 2 : m <= 64 ? 3 : 4;
    for (int i = 0; i < 5; i++) {
        if (by_m[row][i] == f) return i;
    }
    return 0;  // Family::cpu: the only family among CPU candidates
}

// The GEMV's rows per warp by N: at N = 4096, 4 rows a warp fill half the warp slots of an
// H100's one wave; 2 rows took 10.56 against 11.52 us (K = 4096) and 24.70 against 29.03
// (K = 14336); from N = 6144 (13.17 against 14.38) to 128256, 4 rows, except 28672 (42.82
// against 41.20) (w4_untuned_2026-12-07_h100_6e035bb.md).
constexpr int64_t kGemvTwoRowsMaxN = 4096;

// Within a family: the CPU tiles in their listed order, those past the running build's vector
// registers last (they spill: w4::cpu_tile_vectors); the GEMV by N (above); the small-batch
// kernel of the smallest batch >= M (up to 8: passes of 8 past it); the tensor-core kernel of
// the smallest batch of 8, 16 or 32 >= M (passes of 32 past it; batch 64 lost to two passes of
// 32 at M = 64), in its measured form (load_words 4, split 4 up to batch 16; split 8 at 32),
// then that batch in other forms (groups of 32 and 64 take load_words 1 only), then batch 16
// (for configurations without batch 32: fp16 x), then others.
int rank_in_family(const Variant &v, Family f, const W4LinearCall &c) {
    const int64_t batch = v.param_int("batch", 1), rows = v.param_int("rows_per_warp", 1), m = c.m;
    if (f == Family::cpu) return w4::cpu_tile_vectors(int(rows), int(batch)) > cpu_vector_registers();
    if (f == Family::gemv) return rows == (c.n <= kGemvTwoRowsMaxN ? 2 : 4) ? 0 : 1;
    if (f == Family::smallbatch) return batch == (m <= 2 ? 2 : m <= 4 ? 4 : 8) ? 0 : 1;
    if (f != Family::mma) return 0;
    const int64_t want = m <= 8 ? 8 : m <= 16 ? 16 : 32;
    const int64_t load_words = v.param_int("load_words", 1), split = v.param_int("split_k", 1);
    const auto measured_form = [&](int64_t b) {
        return b <= 16 ? load_words == 4 && split == 4 : load_words == 1 && split == 8;
    };
    if (batch == want) return measured_form(batch) ? 0 : 1;
    if (batch == 16) return measured_form(16) ? 2 : 3;
    return 4;
}

int untuned_rank(const Variant &v, const W4LinearCall &c) {
    const Family f = family_of(v);
    return family_tier(f, c.m) * 8 + rank_in_family(v, f, c);
}

// The epilogue variant (bias added to the GEMM's fp32 result) for x's and the scales' dtypes.
const Variant *epilogue_variant(std::string_view x_type, std::string_view scale_type) {
    const std::string kind = std::string(x_type) + "*" + std::string(scale_type);
    const auto &found = candidates("w4_linear_epilogue", Device::cuda, kind, [&](const Variant &r) {
        return r.param("x_type") == x_type && r.param("scale_type") == scale_type;
    });
    return found.empty() ? nullptr : found.front();
}

// Large M through cuBLAS: dequantize(W) in x's dtype into the stream's workspace, then the
// GEMM; without bias it writes y itself (rounded once), with bias an fp32 result, which the
// epilogue adds the bias to and rounds once.
schedx_status run_cublas_path(const Variant &v, const W4LinearCall &c, bool fp16, void *stream, void *ctx) {
    const Variant *epilogue = c.bias ? epilogue_variant(v.param("x_type"), v.param("scale_type")) : nullptr;
    if (c.bias && !epilogue) return fail(SCHEDX_ERR_NO_VARIANT, "no epilogue variant for " + v.name);
    const size_t w_bytes = workspace_slot_bytes(size_t(c.n) * size_t(c.k) * 2);
    const size_t acc_bytes = c.bias ? size_t(c.m) * size_t(c.n) * 4 : 0;
    schedx_status s;
    void *ws = nullptr;
    const auto workspace_lock = lock_stream_workspace(ctx, stream);
    if ((s = cuda_workspace(ctx, stream, w_bytes + acc_bytes, &ws))) return s;
    {
        PipelineCall call(v, stream, ctx);
        bind_w4_linear(call, c, nullptr);
        call.bind_matrix("w_out", ws, c.n, c.k, c.k, 2);
        if ((s = call.run())) return s;
    }
    if (!c.bias) return cublas_gemm_abt(ctx, stream, fp16, c.x, c.ldx, ws, c.k, c.y, true, c.ldy, c.m, c.n, c.k);
    float *acc = reinterpret_cast<float *>(static_cast<uint8_t *>(ws) + w_bytes);
    if ((s = cublas_gemm_abt(ctx, stream, fp16, c.x, c.ldx, ws, c.k, acc, false, c.n, c.m, c.n, c.k))) return s;
    PipelineCall call(*epilogue, stream, ctx);
    call.bind_matrix("acc", acc, c.m, c.n, c.n, 4);
    call.bind_vector("bias", c.bias, c.n, 2);
    call.bind_matrix("y", c.y, c.m, c.n, c.ldy, 2);
    return call.run();
}

// The group rule schedx_w4_linear and schedx_w4_dequantize share.
schedx_status check_groups(int64_t k, int64_t group_size) {
    if (!w4::valid_group_size(group_size)) {
        return fail(SCHEDX_ERR_BAD_SIZE, "group_size " + std::to_string(group_size) + " is not 32, 64 or 128");
    }
    if (k % group_size != 0) {
        return fail(SCHEDX_ERR_BAD_SIZE,
                    "k (" + std::to_string(k) + ") is not a multiple of group_size (" + std::to_string(group_size) + ")");
    }
    return SCHEDX_OK;
}

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

RunnableList runnable_w4_variants(const std::vector<const Variant *> &candidates, const RunKey &key, int device_sm,
                                  const W4LinearCall &c) {
    return runnable_variants(
        candidates, key, device_sm, [&](const Variant &v) { return can_run(v, c); },
        [&](const Variant &v) { return untuned_rank(v, c); });
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
    if ((s = check_groups(k, group_size))) return s;
    const int64_t groups = k / group_size, words = k / w4::kElemsPerWord;
    // Empty operands are valid, as in PyTorch; a pointer to an empty one may be NULL.
    if ((m && k && (s = check_not_null("x", x))) || (n && k && (s = check_not_null("w", w))) ||
        (n && k && (s = check_not_null("scales", scales))) || (m && n && (s = check_not_null("y", y)))) {
        return s;
    }
    const char *x_type = nullptr, *scale_type = nullptr;
    if ((s = check_half_dtype("x_dtype", x_dtype, &x_type)) ||
        (s = check_half_dtype("scales_dtype", scales_dtype, &scale_type))) {
        return s;
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
            return v.param("x_type") == x_type && v.param("scale_type") == scale_type &&
                   (family_of(v) != Family::dequantize || cublas_available());
        });
    const RunKey key{m, n, k, ldx, ldw, ldy, misalignment(x), misalignment(w), group_size, 0, 0, 0};
    const auto runnable = runnable_w4_variants(candidates, key, cuda_context_sm(ctx), c);
    const Variant *v = nullptr;
    if ((s = choose_variant(wl, candidates, runnable, &v))) return s;
    if (family_of(*v) == Family::dequantize) return run_cublas_path(*v, c, x_dtype == SCHEDX_FP16, stream, ctx);

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

extern "C" schedx_status schedx_w4_dequantize(const uint32_t *w, int64_t n, int64_t k, int64_t ldw, int64_t group_size,
                                              const void *scales, const void *zeros, schedx_dtype scales_dtype,
                                              schedx_dtype out_dtype, void *out, int64_t ldo, schedx_device device,
                                              void *stream) {
    using namespace schedx;
    clear_error();
    Device dev;
    schedx_status s;
    if ((s = check_device(device, &dev)) || (s = check_not_negative("k", k)) || (s = check_not_negative("n", n)) ||
        (s = check_groups(k, group_size))) {
        return s;
    }
    if (n && k && ((s = check_not_null("w", w)) || (s = check_not_null("scales", scales)) ||
                   (s = check_not_null("out", out)))) {
        return s;
    }
    const char *out_type = nullptr, *scale_type = nullptr;
    if ((s = check_half_dtype("out_dtype", out_dtype, &out_type)) ||
        (s = check_half_dtype("scales_dtype", scales_dtype, &scale_type))) {
        return s;
    }
    const int64_t groups = k / group_size, words = k / w4::kElemsPerWord;
    if ((s = check_leading_dim("ldw", ldw, "k / 8", words)) || (s = check_leading_dim("ldo", ldo, "k", k))) return s;
    // Output words hold two elements: rows an even number of elements apart.
    if (ldo % 2 != 0) return fail(SCHEDX_ERR_BAD_LEADING_DIM, "ldo (" + std::to_string(ldo) + ") is odd");
    std::vector<Span> spans{{"w", w, n, words, ldw, 4, false},
                            {"scales", scales, n, groups, groups, 2, false},
                            {"out", out, n, k, ldo, 2, true}};
    if (zeros) spans.push_back({"zeros", zeros, n, groups, groups, 2, false});
    void *ctx = nullptr;
    if ((s = check_spans(spans, dev, &ctx))) return s;
    if (n == 0 || k == 0) return SCHEDX_OK;  // out is empty
    if (!aligned_to(out, 4)) {
        return fail(SCHEDX_ERR_MISALIGNED, "out is not 4-byte aligned (two elements a word)");
    }
    const std::string kind = std::string(out_type) + "*" + scale_type;
    const auto &found = candidates("w4_dequantize", dev, kind, [&](const Variant &v) {
        return v.param("x_type") == out_type && v.param("scale_type") == scale_type;
    });
    if (found.empty()) {
        return fail(SCHEDX_ERR_NO_VARIANT, std::string("no w4_dequantize variant on ") +
                                               (dev == Device::cpu ? "the CPU" : "CUDA (w4_linear dequantizes there itself)"));
    }
    PipelineCall call(*found.front(), stream, ctx);
    call.bind_matrix("w", w, n, words, ldw, 4);
    call.bind_matrix("scales", scales, n, groups, groups, 2);
    call.bind_matrix("zeros", zeros ? zeros : scales, n, groups, groups, 2);
    call.bind_int("group_size", int32_t(group_size));
    call.bind_int("has_zeros", zeros ? 1 : 0);
    call.bind_matrix("w_out", out, n, k / 2, ldo / 2, 4);
    return call.run();
}
