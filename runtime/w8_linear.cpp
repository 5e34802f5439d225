// schedx_w8_linear: validation, variant eligibility and the call (one Halide pipeline;
// dequantize + cuBLAS + epilogue or in-place rescale for large M; or x as int8 planes +
// cuBLAS's int8 GEMM + an exact epilogue for M = 7..128).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cublas_gemm.h"
#include "cuda_interop.h"
#include "dispatch.h"
#include "pipeline_call.h"
#include "registry.h"
#include "status.h"
#include "validate.h"
#include "w8_linear_call.h"
#include "w8_linear_layout.h"

namespace schedx {
namespace {

// A w8_linear variant's schedule, typed: read once from its registry row, absent parameters at
// the generator's defaults (w8_linear_layout.h); what can_run and the untuned rank read.
struct W8Schedule {
    // The large-M path's two forms: dequantize (fp32 GEMM result, epilogue) or rescale (the
    // GEMM writes y in x's dtype, which it then scales in place); planes: x as three int8
    // digit planes, cuBLAS's int8 GEMM with W as stored, an exact epilogue.
    enum class Family { general, cpu, autoscheduled, gemv, smallbatch, splitk, mma, dequantize, rescale, planes };
    Family family = Family::general;
    w8::Layout layout;
    bool element_io = false, evict_first = false;
    bool cublas() const { return family == Family::dequantize || family == Family::rescale; }
};
using Family = W8Schedule::Family;

W8Schedule read_schedule(const Variant &v) {
    // By the stage where a variant has one, else by its schedule.
    static const std::pair<std::string_view, Family> kFamilies[] = {
        {"cpu", Family::cpu},           {"cuda_gemv", Family::gemv}, {"cuda_smallbatch", Family::smallbatch},
        {"cuda_splitk", Family::splitk}, {"cuda_mma", Family::mma},   {"dequantize", Family::dequantize},
        {"rescale", Family::rescale},   {"planes", Family::planes}};
    W8Schedule d;
    const std::string_view stage = v.param("stage"), family = stage.empty() ? v.param("schedule") : stage;
    for (const auto &[name, f] : kFamilies) {
        if (family == name) d.family = f;
    }
    if (!v.param("autoscheduler").empty()) d.family = Family::autoscheduled;
    w8::Layout &l = d.layout;
    l.lane = d.family == Family::gemv || d.family == Family::smallbatch || d.family == Family::splitk;
    l.mma = d.family == Family::mma;
    l.split_k = d.family == Family::splitk || l.mma ? v.param_int("split_k", l.split_k) : 1;
    l.load_words = v.param_int("load_words", l.load_words);
    l.vector_words = v.param_int("vector_words", l.vector_words);
    l.rows_per_warp = v.param_int("rows_per_warp", l.rows_per_warp);
    l.batch = v.param_int("batch", l.batch);
    l.k_tail = v.param("k_tail") == "true";
    d.element_io = v.param("element_io") == "true";
    d.evict_first = v.param("evict_first") == "true";
    return d;
}

// Read once per registry row (the registry never changes); a variant outside it, as a test's,
// is read on each call.
W8Schedule schedule_of(const Variant &v) {
    static const std::map<const Variant *, W8Schedule> rows = [] {
        std::map<const Variant *, W8Schedule> out;
        for (const Variant &r : registry()) {
            if (r.op == "w8_linear") out.emplace(&r, read_schedule(r));
        }
        return out;
    }();
    const auto it = rows.find(&v);
    return it != rows.end() ? it->second : read_schedule(v);
}

// The planes path's GEMM does three times the multiply-adds of the bf16 one: past this many
// rows of x it is compute-bound and slower than the dequantize path; its workspace grows with M.
constexpr int64_t kPlanesMaxRows = 1024;

// The word-typed schedules read W and x in the layout's vectors, from row 0, K in whole granules.
bool words_fit(const W8LinearCall &c, const w8::Layout &layout) {
    const int64_t w_vector = 4 * layout.w_vector_words(), x_vector = 4 * layout.x_vector_words();
    return aligned_to(c.x, x_vector) && aligned_to(c.w, w_vector) && (c.ldx * 2) % x_vector == 0 &&
           c.ldw % w_vector == 0 && c.k % layout.k_granule() == 0;
}

void bind_common(PipelineCall &call, const W8LinearCall &c) {
    call.bind_vector("scales", c.scales, c.n, c.scale_bytes);
    if (c.bias) call.bind_vector("bias", c.bias, c.n, c.scale_bytes);
    call.bind_matrix("y", c.y, c.m, c.n, c.ldy, 2);
}

// Dequantize moves 16-byte vectors of int8 (w8_linear_layout.h); cuBLAS takes any leading dimension.
bool cublas_fits(const W8LinearCall &c) {
    constexpr int vec = w8::kStageVectorBytes;
    return c.m > 1 && aligned_to(c.w, vec) && c.ldw % vec == 0 && c.k % vec == 0 && cublas_available();
}

}  // namespace

bool serves(const Variant &v, std::string_view x_type, std::string_view scale_type, bool bias) {
    // The dequantize path leaves scale and bias to its epilogue, so it serves every kind; the
    // rescale one reads scales of its type and adds no bias (after the GEMM's rounding it
    // would round again).
    if (v.param("x_type") != x_type) return false;
    const Family f = schedule_of(v).family;
    if (f == Family::rescale) return v.param("scale_type", "bf16") == scale_type && !bias;
    return f == Family::dequantize || f == Family::planes ||
           (v.param("scale_type", "bf16") == scale_type && (v.param("with_bias") == "true") == bias);
}

void bind_linear(PipelineCall &call, const W8LinearCall &c) {
    call.bind_matrix("x", c.x, c.m, c.k, c.ldx, 2);
    call.bind_matrix("w", c.w, c.n, c.k, c.ldw, 1);
    bind_common(call, c);
}

// Which variants may take a call: hard requirements only (alignment, whole K steps, the
// batch a small-batch variant holds or computes, the generated bounds of autoscheduled
// variants), so exploration measures every candidate; cuBLAS from M = 2, so that the
// crossover with the small-batch kernels is measured, not assumed.
bool can_run(const Variant &v, const W8LinearCall &c) {
    const W8Schedule d = schedule_of(v);
    const w8::Layout &l = d.layout;
    // element_io: any K, row pitch and alignment.
    if (d.element_io) return d.family == Family::smallbatch || c.m == 1;
    switch (d.family) {
    case Family::autoscheduled: {  // the shapes its generated bounds accept
        PipelineCall query(v, nullptr);
        bind_linear(query, c);
        return query.bounds_fit();
    }
    case Family::gemv:
    case Family::splitk: return c.m == 1 && words_fit(c, l);
    // k_tail: K in whole vectors; the rest past the whole steps runs as a guarded update.
    // Its small-batch kernels also take M past their batch (W read once per tile of rows):
    // where K is off the cuBLAS paths' 16, nothing else but the general variant could.
    case Family::smallbatch: return (l.k_tail || c.m <= l.batch) && words_fit(c, l);
    case Family::mma: return c.m <= l.batch && words_fit(c, l);
    // The CPU schedule with batch B always computes B rows per pass: from M = B on.
    case Family::cpu: return c.m >= l.batch;
    // The in-place rescale moves 16-byte vectors of outputs.
    case Family::rescale: {
        constexpr int vec = w8::kStageVectorBytes, outputs = vec / 2;
        return aligned_to(c.y, vec) && c.ldy % outputs == 0 && c.n % outputs == 0 && cublas_fits(c);
    }
    case Family::dequantize: return cublas_fits(c);
    // cuBLAS's int8 GEMM takes K and W's rows in whole 16-byte steps; its int32 sums of
    // products of at most 2^14 stay exact up to K = 2^17; the workspace's planes and int32
    // products must fit Halide's 32-bit indexing, as the caller's buffers do.
    case Family::planes: {
        const int64_t rows = 3 * c.m;
        return c.m <= kPlanesMaxRows && c.k <= (int64_t(1) << 17) && rows * (c.k + w8::kPlanesRowPad) <= INT32_MAX &&
               rows * c.n <= INT32_MAX && aligned16(c.w) && c.ldw % 16 == 0 && c.k % 16 == 0 && cublas_available();
    }
    case Family::general: return true;
    }
    return true;
}

namespace {

// Untuned preference, from the H200's measurements: the cuBLAS path goes behind the
// general kernel for small work (its three launches cost ~10 us, which the general
// kernel's rate, 615 us at M = 16 and N = K = 8192, matches near 2^24 multiply-adds).
// The small-batch kernels stay ahead of it up to M = 16: b16_r4w4_coalesced took 28.3 /
// 90.9 / 79.3 / 93.8 us at (N, K) = 4096^2 / (14336, 4096) / (4096, 14336) / 8192^2
// against cuBLAS's 30.6 / 90.7 / 89.1 / 98.6 (explore_w8_m8_m16_2026-12-03_h200_1a12608.md).
// Split-K goes ahead of the GEMV (and of the small-batch kernels, at M = 1 a slower GEMV)
// for few, long rows, where a warp per row leaves the GPU waiting on each row's loads:
// M = 1, (N, K) = (1024, 14336) 8.30 against 11.60 us, (2048, 14336) 11.0 against 13.3,
// (2048, 8192) 7.79 against 8.36; within 4% either way at N = 256..1024
// (explore_w8_splitk_2026-12-03_h200_140082f.md).
// The int8 planes path wins untuned within its variants.json bounds (untuned_min_m and the
// rest, with the results file behind each): past them a tile, the other planes GEMM or the
// dequantize path wins, and small work pays its three launches.
bool outside_untuned_bounds(const Variant &v, const W8LinearCall &c) {
    const int work_log2 = v.param_int("untuned_work_log2", -1);
    return c.m < v.param_int("untuned_min_m", 0) || c.m > v.param_int("untuned_max_m", INT32_MAX) ||
           c.n < v.param_int("untuned_min_n", 0) || (work_log2 >= 0 && c.m * c.n * c.k <= (int64_t(1) << work_log2));
}

// `splitk_runs`: whether a split-K variant takes the call (K in its whole steps); where none
// does, the GEMV stays ahead of the general variant.
bool loses_untuned(const Variant &v, const W8LinearCall &c, bool splitk_runs) {
    const bool large = c.m * c.n * c.k >= (int64_t(1) << 24);
    const W8Schedule d = schedule_of(v);
    const w8::Layout &l = d.layout;
    const bool lanes = d.family == Family::gemv || d.family == Family::smallbatch;
    if (d.family == Family::mma) return true;  // all but the split-K forms of mma_rank lose or are untimed
    if (d.family == Family::cpu) return l.cpu_tile_vectors() > cpu_vector_registers();
    // The autoschedulers' variants are baselines: 6-12x the hand CPU schedules (M = 16, N = K = 4096).
    if (d.family == Family::autoscheduled) return true;
    // A k_tail tile narrower than the call's rows (up to 16) reads W once per tile of rows.
    if (d.family == Family::smallbatch && l.k_tail && l.batch < std::min<int64_t>(c.m, 16)) return true;
    // Whole-step lane kernels with 4- or 8-byte W loads run only where K is in whole 16-byte
    // vectors, which the 16-byte k_tail kernels take faster: M = 1, N = 4096, K = 11008 (43
    // steps of 256) gemv_r4w2 27.3 us against gemv_r2w8_coalesced_ktail 15.5 (ragged_2026-12-05_h200_b0d036e.md).
    if (lanes && !l.k_tail && l.load_words < 4) return true;
    if (d.family == Family::gemv || (d.family == Family::smallbatch && c.m == 1)) {
        return splitk_runs && c.n <= 2048 && c.k >= 4 * c.n;
    }
    // N off 16: M = 16, N = 4097, K = 4096 took 62.1 us against 25.1 for b8_r8w4_coalesced_ktail.
    if (d.family == Family::planes) return outside_untuned_bounds(v, c) || c.n % 16 != 0;
    // The dequantize + cuBLAS paths stay behind the lane kernels up to M = 16, k_tail ones
    // included: M = 4, N = 4096, K = 4544 31.6 us against b4_r4w8_coalesced_ktail's 13.5.
    return d.cublas() && (!large || c.m <= 16);
}

// Untuned rank of a split-K tensor-core form, 0 first, -1 where none applies (measurements in
// docs/w8_linear.md). M = 3..16: b8 / b16, 16 rows of W per warp, the split that keeps N / 16 *
// split_k near 4096 warps (H200, N = K = 8192, M = 16: 27.4 against 40.4 us for the best other
// path, w8_mma_splitk_2026-12-05_h200_b46a0f6.md). M = 17..64: b32 / b64, N / rows_per_warp *
// split_k nearest 2048 warps, 32 rows per warp on a tie (M = 32: 33.4 against the planes path's
// 49.7 us, w8_mma_m17_m64_2026-12-05_h200_0c56cfd.md), except M = 33..64 at N > 12288, where
// the planes path stays first (47.5 against 54.4 us there).
int mma_rank(const Variant &v, const W8LinearCall &c) {
    const W8Schedule d = schedule_of(v);
    if (d.family != Family::mma || c.m < 3 || c.m > 64 || c.n * c.k < (int64_t(1) << 24)) return -1;
    const int64_t batch = c.m <= 8 ? 8 : c.m <= 16 ? 16 : c.m <= 32 ? 32 : 64;
    if (batch == 64 && c.n > 12288) return -1;
    const int64_t rows = d.layout.rows_per_warp, split = d.layout.split_k, load_words = d.layout.load_words;
    if (d.layout.batch != batch || (load_words != 4 && (batch > 16 || !d.layout.k_tail)) || split == 1 ||
        (batch <= 16 && rows != 16)) {
        return -1;
    }
    if (batch > 16) {
        const double octaves = std::abs(std::log2(double(c.n / rows * split) / 2048.0));
        return std::min(3, int(std::lround(2 * octaves)) + (rows == 16 ? 1 : 0));
    }
    // The bias, fp16 and k_tail forms rank as their bf16 twins (bias, M = 16: 27.5 against 108.4 us
    // for the lane tiles, quantize_tiles_2026-12-05_h200_7943873.md), a k_tail form one below its split's,
    // with 8-byte W loads one more, with 4-byte two more: where K is off 16 or 8 they run alone (H100,
    // 16 x 4096 x 4100 15.1 us against the lane tiles' 27.5, w8_mma_ktail_vectors_2026-12-05_h100_cf8c10e.md).
    const int preferred_log2 = c.n <= 6144 ? 4 : (c.n <= 12288 ? 3 : 2);  // split 16, 8, 4
    const int split_log2 = int(std::log2(double(split)));
    const int narrow = load_words == 2 ? 1 : load_words == 1 ? 2 : 0;
    return std::abs(split_log2 - preferred_log2) + (d.layout.k_tail ? 1 : 0) + narrow;
}

}  // namespace

RunnableList runnable_w8_variants(const std::vector<const Variant *> &candidates, const RunKey &key, int device_sm,
                                  const W8LinearCall &c) {
    return runnable_variants(
        candidates, key, device_sm, [&](const Variant &v) { return can_run(v, c); },
        [&, splitk_runs = std::optional<bool>()](const Variant &v) mutable {
            if (!splitk_runs) {
                splitk_runs = std::any_of(candidates.begin(), candidates.end(), [&](const Variant *o) {
                    return schedule_of(*o).family == Family::splitk && can_run(*o, c);
                });
            }
            const int mma = mma_rank(v, c);
            return mma >= 0 ? mma : (loses_untuned(v, c, *splitk_runs) ? 7 : 6);  // mma ranks are 0..5
        });
}

namespace {

// The helper variant of `stage` (epilogue or planes_epilogue) for a call's dtypes and bias,
// from the w8_linear_epilogue list; looked up once per kind (candidates memoises by key).
const Variant *epilogue_variant(const std::string &stage, std::string_view x_type, const std::string &scale_type,
                                bool bias) {
    const std::string kind = stage + ":" + std::string(x_type) + "*" + scale_type + (bias ? "+bias" : "");
    const auto &found = candidates("w8_linear_epilogue", Device::cuda, kind, [&](const Variant &r) {
        return r.param("stage") == stage && r.param("x_type") == x_type &&
               r.param("scale_type", "bf16") == scale_type && (r.param("with_bias") == "true") == bias;
    });
    return found.empty() ? nullptr : found.front();
}

// Large M through cuBLAS: W in x's dtype into the workspace, then either an fp32 GEMM
// result after it, which the epilogue turns into y with scale and bias (rounding once, as
// the fused variants do), or (rescale) y written by the GEMM and scaled in place. The GEMM
// is cublasGemmEx's pick, or with cublaslt_heuristic_rank that rank of cuBLASLt's list.
schedx_status run_cublas_path(const Variant &v, const W8LinearCall &c, bool fp16, const std::string &scale_type,
                              void *stream, void *ctx) {
    const bool rescale = schedule_of(v).family == Family::rescale;
    const std::string_view x_type = v.param("x_type");
    // The other stage's variant, looked up once per kind (candidates memoises by key).
    const Variant *dequant = &v, *epilogue = &v;
    if (rescale) {
        const auto &found = candidates("w8_linear", Device::cuda, "dequantize:" + std::string(x_type),
                                       [&](const Variant &r) {
                                           return r.param("stage") == "dequantize" && r.param("x_type") == x_type;
                                       });
        dequant = found.empty() ? nullptr : found.front();
    } else {
        epilogue = epilogue_variant("epilogue", x_type, scale_type, c.bias != nullptr);
    }
    if (!dequant || !epilogue) return fail(SCHEDX_ERR_NO_VARIANT, "no dequantize or epilogue variant for " + v.name);
    schedx_status s;
    const size_t w_bytes = workspace_slot_bytes(size_t(c.n) * size_t(c.k) * 2);
    const size_t acc_bytes = rescale ? 0 : workspace_slot_bytes(size_t(c.m) * size_t(c.n) * 4);
    // A ranked cuBLASLt GEMM's workspace follows W's and the accumulator's.
    const int rank = v.param_int("cublaslt_heuristic_rank", -1);
    void *ws = nullptr;
    const auto workspace_lock = lock_stream_workspace(ctx, stream);
    if ((s = cuda_workspace(ctx, stream, w_bytes + acc_bytes + (rank >= 0 ? kCublasLtWorkspaceBytes : 0), &ws))) {
        return s;
    }
    void *lt_ws = static_cast<uint8_t *>(ws) + w_bytes + acc_bytes;
    {
        PipelineCall call(*dequant, stream, ctx);
        call.bind_matrix("w", c.w, c.n, c.k, c.ldw, 1);
        call.bind_matrix("w_out", ws, c.n, c.k, c.k, 2);
        if ((s = call.run())) return s;
    }
    PipelineCall call(*epilogue, stream, ctx);
    if (rescale) {
        if ((s = cublas_gemm_abt(ctx, stream, fp16, c.x, c.ldx, ws, c.k, c.y, true, c.ldy, c.m, c.n, c.k, rank, lt_ws))) {
            return s;
        }
        call.bind_matrix("acc", c.y, c.m, c.n, c.ldy, 2);
    } else {
        float *acc = reinterpret_cast<float *>(static_cast<uint8_t *>(ws) + w_bytes);
        if ((s = cublas_gemm_abt(ctx, stream, fp16, c.x, c.ldx, ws, c.k, acc, false, c.n, c.m, c.n, c.k, rank, lt_ws))) {
            return s;
        }
        call.bind_matrix("acc", acc, c.m, c.n, c.n, 4);
    }
    bind_common(call, c);
    return call.run();
}

// The int8 planes path: rows 3m .. 3m + 2 of `planes` are x's row m as int8 digits (its
// exponent in byte K), cuBLAS multiplies them by W as stored into int32, and the epilogue
// adds the digits' products exactly and applies scale and bias.
schedx_status run_planes_path(const Variant &v, const W8LinearCall &c, const std::string &scale_type, void *stream,
                              void *ctx) {
    const Variant *epilogue = epilogue_variant("planes_epilogue", v.param("x_type"), scale_type, c.bias != nullptr);
    if (!epilogue) return fail(SCHEDX_ERR_NO_VARIANT, "no planes epilogue variant for " + v.name);
    const int64_t rows = 3 * c.m, pitch = c.k + w8::kPlanesRowPad;
    const size_t planes_bytes = workspace_slot_bytes(size_t(rows) * size_t(pitch));
    schedx_status s;
    void *ws = nullptr;
    const auto workspace_lock = lock_stream_workspace(ctx, stream);
    if ((s = cuda_workspace(ctx, stream, planes_bytes + size_t(rows) * size_t(c.n) * 4, &ws))) return s;
    int8_t *planes = static_cast<int8_t *>(ws);
    int32_t *acc = reinterpret_cast<int32_t *>(static_cast<uint8_t *>(ws) + planes_bytes);
    {
        PipelineCall call(v, stream, ctx);
        call.bind_matrix("x", c.x, c.m, c.k, c.ldx, 2);
        call.bind_matrix("planes", planes, rows, pitch, pitch, 1);
        if ((s = call.run())) return s;
    }
    CublasLtConfig lt;
    const bool pinned = parse_cublaslt_config(v.param("cublaslt_config"), &lt);
    if ((s = cublas_gemm_i8_abt(ctx, stream, planes, pitch, c.w, c.ldw, acc, c.n, rows, c.n, c.k, pinned ? &lt : nullptr)))
        return s;
    PipelineCall call(*epilogue, stream, ctx);
    call.bind_matrix("acc", acc, rows, c.n, c.n, 4);
    call.bind_matrix("planes", planes, rows, pitch, pitch, 1);
    bind_common(call, c);
    return call.run();
}

float scale_dtype_value(const void *p, int64_t i, int bytes) {
    uint32_t bits = 0;
    if (bytes == 4) {
        std::memcpy(&bits, static_cast<const uint32_t *>(p) + i, 4);
    } else {
        bits = uint32_t(static_cast<const uint16_t *>(p)[i]) << 16;  // bf16
    }
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

// v rounded to nearest-even in x's dtype, as bits.
uint16_t round_to_half(float v, bool fp16) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    if (fp16) {  // by bits: clang 14 has no _Float16 on x86-64 (the fuzz build)
        const uint16_t sign = uint16_t((u >> 16) & 0x8000);
        const uint32_t a = u & 0x7FFFFFFF;
        if (a > 0x7F800000) return sign | 0x7E00;   // NaN
        if (a >= 0x477FF000) return sign | 0x7C00;  // 65520 and up round to inf
        if (a < 0x38800000) {                       // below 2^-14: a subnormal half (m * 2^-24)
            float af;
            std::memcpy(&af, &a, 4);
            return sign | uint16_t(std::nearbyint(af * 16777216.0f));  // exact scaling, nearest-even
        }
        const uint32_t r = a - 0x38000000;  // exponent bias 127 -> 15
        return sign | uint16_t((r + 0xFFF + ((r >> 13) & 1)) >> 13);
    }
    if ((u & 0x7FFFFFFF) > 0x7F800000) return uint16_t((u >> 16) | 0x40);  // NaN stays NaN
    return uint16_t((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

// K = 0: the empty sum is 0, so y = 0 * scales[n] (+ bias[n]), rounded once as every path
// rounds (NaN where a scale is inf or NaN, as (x @ W.T) * scales computes it). On CUDA the
// epilogue pipeline reads a zeroed row of the stream's workspace as every row of its
// accumulator (leading dimension 0): a memset and one kernel, no GEMM.
schedx_status write_empty_sum(Device device, const W8LinearCall &c, bool fp16, std::string_view x_type,
                              const std::string &scale_type, void *stream, void *ctx) {
    if (device == Device::cpu) {
        for (int64_t n = 0; n < c.n; n++) {
            float v = 0.0f * scale_dtype_value(c.scales, n, c.scale_bytes);
            if (c.bias) v += scale_dtype_value(c.bias, n, c.scale_bytes);
            const uint16_t bits = round_to_half(v, fp16);
            for (int64_t m = 0; m < c.m; m++) std::memcpy(static_cast<uint16_t *>(c.y) + m * c.ldy + n, &bits, 2);
        }
        return SCHEDX_OK;
    }
    const Variant *epilogue = epilogue_variant("epilogue", x_type, scale_type, c.bias != nullptr);
    if (!epilogue) return fail(SCHEDX_ERR_NO_VARIANT, "no epilogue variant for an empty sum");
    const auto workspace_lock = lock_stream_workspace(ctx, stream);
    void *zeros = nullptr;
    schedx_status s;
    if ((s = cuda_workspace(ctx, stream, size_t(c.n) * 4, &zeros)) || (s = cuda_fill_words(ctx, stream, zeros, size_t(c.n)))) {
        return s;
    }
    PipelineCall call(*epilogue, stream, ctx);
    call.bind_matrix("acc", zeros, c.m, c.n, 0, 4);
    bind_common(call, c);
    return call.run();
}

}  // namespace
}  // namespace schedx

extern "C" schedx_status schedx_w8_linear(const void *x, int64_t m, int64_t k, int64_t ldx, schedx_dtype x_dtype,
                                          const int8_t *w, int64_t n, int64_t ldw, const void *scales,
                                          schedx_dtype scales_dtype, const void *bias, void *y, int64_t ldy,
                                          schedx_device device, void *stream) {
    using namespace schedx;
    clear_error();
    Device dev;
    schedx_status s;
    if ((s = check_device(device, &dev)) || (s = check_not_negative("m", m)) || (s = check_not_negative("k", k)) ||
        (s = check_not_negative("n", n))) {
        return s;
    }
    // Empty operands are valid, as in PyTorch; a pointer to an empty one may be NULL.
    if ((m && k && (s = check_not_null("x", x))) || (n && k && (s = check_not_null("w", w))) ||
        (n && (s = check_not_null("scales", scales))) || (m && n && (s = check_not_null("y", y)))) {
        return s;
    }
    const char *x_type = nullptr;
    if ((s = check_half_dtype("x_dtype", x_dtype, &x_type))) return s;
    if (scales_dtype != SCHEDX_BF16 && scales_dtype != SCHEDX_FP32) {
        return fail(SCHEDX_ERR_UNSUPPORTED_DTYPE,
                    "scales_dtype " + std::to_string(static_cast<int>(scales_dtype)) + " is not bf16 or fp32");
    }
    if ((s = check_leading_dim("ldx", ldx, "k", k)) || (s = check_leading_dim("ldw", ldw, "k", k)) ||
        (s = check_leading_dim("ldy", ldy, "n", n))) {
        return s;
    }
    const int scale_bytes = scales_dtype == SCHEDX_FP32 ? 4 : 2;
    std::vector<Span> spans{{"x", x, m, k, ldx, 2, false},
                            {"w", w, n, k, ldw, 1, false},
                            {"scales", scales, 1, n, n, scale_bytes, false},
                            {"y", y, m, n, ldy, 2, true}};
    if (bias) spans.push_back({"bias", bias, 1, n, n, scale_bytes, false});
    void *ctx = nullptr;
    if ((s = check_spans(spans, dev, &ctx))) return s;

    const W8LinearCall c{x, m, k, ldx, w, n, ldw, scales, bias, scale_bytes, y, ldy};
    const std::string scale_type = scales_dtype == SCHEDX_FP32 ? "fp32" : "bf16";
    if (m == 0 || n == 0) return SCHEDX_OK;  // y is empty
    if (k == 0) return write_empty_sum(dev, c, x_dtype == SCHEDX_FP16, x_type, scale_type, stream, ctx);
    const Workload wl{"w8_linear",
                      std::string(x_type) + "*int8*" + scale_type + (bias ? "+bias" : "") + "->" + x_type, dev,
                      {m, n, k}};
    const std::vector<const Variant *> &candidates = schedx::candidates(
        wl.op, dev, wl.dtypes, [&](const Variant &v) { return serves(v, x_type, scale_type, bias != nullptr); });
    const RunKey key{m, n, k, ldx, ldw, ldy, misalignment(x), misalignment(w), misalignment(y), bias != nullptr};
    const auto runnable = runnable_w8_variants(candidates, key, cuda_context_sm(ctx), c);
    const Variant *v = nullptr;
    if ((s = choose_variant(wl, candidates, runnable, &v))) return s;
    const W8Schedule d = schedule_of(*v);
    if (d.cublas()) return run_cublas_path(*v, c, x_dtype == SCHEDX_FP16, scale_type, stream, ctx);
    if (d.family == Family::planes) return run_planes_path(*v, c, scale_type, stream, ctx);

    PipelineCall call(*v, stream, ctx);
    bind_linear(call, c);
    // The lane-layout and tensor-core kernels read each weight once: W streams through L2 so that it does
    // not evict x, y and what the caller's other kernels keep there (evict_first variants
    // mark their loads so instead).
    const bool w_read_once = (d.layout.lane || d.layout.mma) && !d.evict_first;
    const L2StreamingWindow window(c.w, w_read_once ? size_t((c.n - 1) * c.ldw + c.k) : 0);
    return call.run();
}
