// schedx_cast_transpose_fp8 (and its divide form): validation, variant eligibility and the call.
#include <mutex>
#include <string>
#include <vector>

#include "abs_max.h"
#include "cast_transpose_call.h"
#include "cast_transpose_layout.h"
#include "cuda_interop.h"
#include "dispatch.h"
#include "pipeline_call.h"
#include "registry.h"
#include "status.h"
#include "validate.h"

namespace schedx {
namespace {

const char *dtype_name(schedx_dtype t) {
    switch (t) {
    case SCHEDX_BF16: return "bf16";
    case SCHEDX_FP16: return "fp16";
    case SCHEDX_FP32: return "fp32";
    default: return nullptr;
    }
}

}  // namespace

void bind_cast(PipelineCall &call, const CastTransposeCall &c) {
    call.bind_matrix("input", c.x, c.m, c.k, c.ldx, c.elem_bytes);
    call.bind_scalar_buffer("scale", c.scale);
    call.bind_int("fp8_format", c.format);
    call.bind_matrix("rows", c.rows, c.m, c.k, c.ld_rows, 1);
    call.bind_matrix("cols", c.cols, c.k, c.m, c.ld_cols, 1);
    // Binding a name the variant lacks does nothing: amax variants have both buffers, or
    // (tiled kernels) both addresses, which their atomics update.
    call.bind_scalar_buffer("amax", c.amax);
    call.bind_scalar_buffer("scale_inv", c.scale_inv);
    call.bind_address("amax_address", c.amax);
    call.bind_address("scale_inv_address", c.scale_inv);
}

namespace {

// The short dimension a cuda_skinny variant takes: its threads walk it one element per step.
// Up to one row short of the smallest tile (the default, 64), which no tiled variant takes.
constexpr int64_t kSkinnyMax = cast_layout::kTile - 1;

// A tiled variant's tile in elements: tile_rows along M (square when absent) by tile along K.
struct TileShape {
    int64_t m, k;
};
TileShape tile_shape(const Variant &v) {
    const int64_t k = v.param_int("tile", cast_layout::kTile);
    return {v.param_int("tile_rows", k), k};
}

}  // namespace

// Word-I/O tiled variants take 16-byte aligned pointers and rows and at least one tile;
// a ragged M or K runs as whole tiles plus the last tile row or column shifted inwards
// (tile_cover.h), whose pointers must be 16-byte aligned too. Element-I/O tiled variants
// need only one tile (the ABI has checked element alignment). Autoscheduled variants take
// the shapes their generated bounds accept.
bool can_run(const Variant &v, const CastTransposeCall &c) {
    if (!v.param("autoscheduler").empty()) {
        PipelineCall query(v, nullptr);
        bind_cast(query, c);
        return query.bounds_fit();
    }
    // One thread per element of the long dimension, walking the short one (at most kSkinnyMax).
    if (v.param("schedule") == "cuda_skinny") return (v.param("long_dim", "k") == "k" ? c.m : c.k) <= kSkinnyMax;
    if (v.param("schedule") != "cuda_tiled") return true;
    const TileShape t = tile_shape(v);
    if (c.m < t.m || c.k < t.k) return false;
    if (v.param("io", "word") == "element") return true;
    // cols_io=element stores cols by bytes: any ld_cols and M.
    const bool shift_m = c.m % t.m != 0, shift_k = c.k % t.k != 0, cols_bytes = v.param("cols_io") == "element";
    constexpr int64_t vec = cast_layout::kWordVectorBytes;
    return aligned_to(c.x, vec) && (c.ldx * c.elem_bytes) % vec == 0 && (!shift_k || (c.k * c.elem_bytes) % vec == 0) &&
           (!c.rows || (aligned_to(c.rows, vec) && c.ld_rows % vec == 0 && (!shift_k || c.k % vec == 0))) &&
           (!c.cols || cols_bytes || (aligned_to(c.cols, vec) && c.ld_cols % vec == 0 && (!shift_m || c.m % vec == 0)));
}

// Untuned, the general, skinny and autoscheduled CUDA variants go after every tiled one: the
// element-I/O tiles take the rows word tiles refuse; below a tile the skinny kernels go first,
// except a short M above 16, where the general variant is faster: H200, 32 x 16384 11.8 us
// against 19.2, 48 x 8192 11.3 against 27.5; 7 x 16384 6.4 against 11.1 (ragged_2026-12-05_h200_b46a0f6.md).
constexpr int64_t kSkinnyShortMUntuned = 16;

// An amax call takes a tile with the fused amax before one that needs the abs_max pass, which
// reads x again: H200, 4097x4096 31.6 us (element_io_amax) against 44.0 (cols_element_cvt and
// the pass) (ragged_side_streams_2026-12-05_h200_b3f28bb.md).
// Where rows' pitch is off 32 bytes, each tile's rows run starts mid-sector in every other row:
// 128-wide tiles go first. 12000x6000: t128r4w8 94.0 us against t64r8w4_cvt 107.0 (H200),
// 123.5 against 142.9 (H100, ragged_rows_pitch_2026-12-05_h100_2a87bb3.md).
int untuned_rank(const Variant &v, const CastTransposeCall &c) {
    if (v.device != Device::cuda) return cpu_tile_rank(v, c.m, c.k);
    if (v.param("schedule") == "cuda_tiled") {
        const bool split_sectors = c.rows && c.ld_rows % 32 != 0 && v.param_int("tile", cast_layout::kTile) < 128 &&
                                   v.param("io") != "element";
        return ((c.amax || c.scale_inv) && v.param("with_amax") != "true" ? 2 : 0) + (split_sectors ? 1 : 0);
    }
    if (v.param("schedule") != "cuda_skinny") return 4;
    return v.param("long_dim", "k") == "k" && c.m > kSkinnyShortMUntuned ? 5 : 3;
}

namespace {

// scale_inv = 1 / scale by its one-value pipeline (in stream order on CUDA).
schedx_status run_scale_inverse(Device device, const CastTransposeCall &c, void *stream, void *ctx) {
    const auto &found = candidates("scale_inverse", device, "", [](const Variant &) { return true; });
    if (found.empty()) return fail(SCHEDX_ERR_NO_VARIANT, "no scale_inverse variant");
    PipelineCall call(*found.front(), stream, ctx);
    call.bind_scalar_buffer("scale", c.scale);
    call.bind_scalar_buffer("scale_inv", c.scale_inv);
    return call.run();
}

// amax = max |x| into the caller's float: the abs_max pass (dispatched by alignment like the
// cast), or 0 for an empty x, as PyTorch gives it (on CUDA a 4-byte memset in stream order).
schedx_status write_amax(Device device, const char *in_type, const CastTransposeCall &c, void *stream, void *ctx) {
    if (c.m > 0 && c.k > 0) return run_abs_max(device, in_type, c.x, c.m, c.k, c.ldx, c.elem_bytes, c.amax, stream, ctx);
    if (device == Device::cuda) return cuda_fill_words(ctx, stream, c.amax);
    *c.amax = 0.0f;
    return SCHEDX_OK;
}

// amax, then scale_inv = 1 / scale: the cast's outputs when its variant has no fused amax,
// or x is empty (no cast runs).
schedx_status run_amax_pass(Device device, const char *in_type, const CastTransposeCall &c, void *stream, void *ctx) {
    const schedx_status s = write_amax(device, in_type, c, stream, ctx);
    return s ? s : run_scale_inverse(device, c, stream, ctx);
}

}  // namespace
}  // namespace schedx

namespace schedx {
namespace {

// A cast's checked arguments.
struct CheckedCast {
    CastTransposeCall c;
    Device dev;
    const char *in_type;
    void *ctx;
};

// What a cast does with its one float: multiplies x by it, divides x by it (the divide entry
// point, which names it divisor), or computes it (current scaling).
enum class ScaleRole { multiplier, divisor, written };

// Checks a cast's arguments.
schedx_status check_cast(const void *x, int64_t m, int64_t k, int64_t ldx, schedx_dtype x_dtype, const float *scale,
                         ScaleRole role, schedx_fp8_format format, uint8_t *rows, int64_t ld_rows, uint8_t *cols,
                         int64_t ld_cols, float *amax, float *scale_inv, schedx_device device, CheckedCast *out) {
    Device dev;
    schedx_status s;
    if ((s = check_device(device, &dev)) || (s = check_not_negative("m", m)) || (s = check_not_negative("k", k))) {
        return s;
    }
    // An empty x (an MoE expert without tokens) is valid, as in PyTorch; its pointers may be NULL.
    const bool empty = m == 0 || k == 0;
    const char *scale_name = role == ScaleRole::divisor ? "divisor" : "scale";
    if ((!empty && (s = check_not_null("x", x))) || (s = check_not_null(scale_name, scale))) return s;
    if (!rows && !cols && !empty) return fail(SCHEDX_ERR_NULL_POINTER, "rows and cols are both NULL: nothing to write");
    if (!amax != !scale_inv) return fail(SCHEDX_ERR_NULL_POINTER, "amax and scale_inv must be both given or both NULL");
    const char *in_type = dtype_name(x_dtype);
    if (!in_type) {
        return fail(SCHEDX_ERR_UNSUPPORTED_DTYPE,
                    "x_dtype " + std::to_string(static_cast<int>(x_dtype)) + " is not bf16, fp16 or fp32");
    }
    if (format != SCHEDX_E4M3FN && format != SCHEDX_E5M2) {
        return fail(SCHEDX_ERR_UNSUPPORTED_FORMAT,
                    "format " + std::to_string(static_cast<int>(format)) + " is not e4m3fn or e5m2");
    }
    if ((s = check_leading_dim("ldx", ldx, "k", k)) || (rows && (s = check_leading_dim("ld_rows", ld_rows, "k", k))) ||
        (cols && (s = check_leading_dim("ld_cols", ld_cols, "m", m)))) {
        return s;
    }
    const int elem_bytes = x_dtype == SCHEDX_FP32 ? 4 : 2;
    std::vector<Span> spans{{"x", x, m, k, ldx, elem_bytes, false},
                            {scale_name, scale, 1, 1, 1, 4, role == ScaleRole::written}};
    if (rows) spans.push_back({"rows", rows, m, k, ld_rows, 1, true});
    if (cols) spans.push_back({"cols", cols, k, m, ld_cols, 1, true});
    if (amax) spans.push_back({"amax", amax, 1, 1, 1, 4, true});
    if (scale_inv) spans.push_back({"scale_inv", scale_inv, 1, 1, 1, 4, true});
    void *ctx = nullptr;
    if ((s = check_spans(spans, dev, &ctx))) return s;
    *out = {{x, m, k, ldx, elem_bytes, scale, format, rows, cols, ld_rows, ld_cols, amax, scale_inv,
             role == ScaleRole::divisor},
            dev, in_type, ctx};
    return SCHEDX_OK;
}

// The variant dispatch picks for a checked cast of a non-empty x.
schedx_status choose_cast_variant(const CheckedCast &cc, const Variant **v) {
    const CastTransposeCall &c = cc.c;
    const std::string outputs = c.rows && c.cols ? "both" : (c.rows ? "rows" : "cols");
    const bool e5m2 = c.format == SCHEDX_E5M2;
    const std::string fp8_name = e5m2 ? "e5m2" : "e4m3";
    const bool want_amax = c.amax || c.scale_inv;
    const std::string_view scale_by = c.divide ? "divide" : "multiply";
    const Workload w{"cast_transpose",
                     std::string(cc.in_type) + "->" + (e5m2 ? "e5m2" : "e4m3fn") + ":" + outputs +
                         (want_amax ? "+amax" : "") + (c.divide ? ":divide" : ""),
                     cc.dev,
                     {c.m, c.k}};
    const std::vector<const Variant *> &candidates = schedx::candidates(w.op, cc.dev, w.dtypes, [&](const Variant &v) {
        const std::string_view fp8 = v.param("fp8", "any");
        // A variant with fused amax serves only calls that want it (it would need scratch otherwise).
        return v.param("in_type") == cc.in_type && v.param("outputs", "both") == outputs &&
               (fp8 == "any" || fp8 == fp8_name) && (v.param("with_amax") != "true" || want_amax) &&
               v.param("scale_by", "multiply") == scale_by;
    });
    const RunKey key{c.m, c.k, c.ldx, c.rows ? c.ld_rows : -1, c.cols ? c.ld_cols : -1, c.elem_bytes,
                     aligned16(c.x), !c.rows || aligned16(c.rows), !c.cols || aligned16(c.cols)};
    const auto runnable =
        runnable_variants(candidates, key, cuda_context_sm(cc.ctx), [&](const Variant &v) { return can_run(v, c); },
                          [&](const Variant &v) { return untuned_rank(v, c); });
    return choose_variant(w, candidates, runnable, v);
}

// Launches variant `v` over `regions` of a checked cast. Tiled variants with fused amax take
// the maximum of their tiles' maxima in the caller's amax, zeroed on the stream first (once:
// every region adds its own), and write one word per tile into the stream's workspace (each
// region its own words, as the regions may run at once). The shifted regions (a tile wide,
// a wave of blocks or less each) run on side streams beside the whole tiles, one each,
// launched first. The workspace lock, held for the call, keeps another thread's call on this stream
// from reallocating the workspace or taking the side stream.
schedx_status launch_regions(const CheckedCast &cc, const Variant &v, const std::vector<TileRegion> &regions,
                             const TileShape &t, void *stream) {
    const CastTransposeCall &c = cc.c;
    void *ctx = cc.ctx;
    const bool side = cc.dev == Device::cuda && regions.size() > 1, fused_amax = v.argument("amax_address") != nullptr;
    std::unique_lock<std::mutex> workspace_lock;
    if (side || fused_amax) workspace_lock = lock_stream_workspace(ctx, stream);
    schedx_status s;
    std::vector<uint32_t *> tile_sinks(regions.size(), nullptr);
    if (fused_amax) {
        std::vector<size_t> offsets;
        size_t tiles = 0;
        for (const TileRegion &r : regions) {
            offsets.push_back(tiles);
            tiles += size_t(r.rows / t.m) * size_t(r.cols / t.k);
        }
        void *sink = nullptr;
        if ((s = cuda_workspace(ctx, stream, tiles * 4, &sink)) || (s = cuda_fill_words(ctx, stream, c.amax))) return s;
        for (size_t i = 0; i < regions.size(); i++) tile_sinks[i] = static_cast<uint32_t *>(sink) + offsets[i];
    }
    auto launch = [&](size_t i, void *on) {
        const TileRegion &r = regions[i];
        PipelineCall call(v, on, ctx);
        bind_cast(call, c.region(r));
        if (tile_sinks[i]) call.bind_matrix("tile_sink", tile_sinks[i], r.rows / t.m, r.cols / t.k, r.cols / t.k, 4);
        return call.run();
    };
    if (!side) {
        for (size_t i = 0; i < regions.size(); i++) {
            if ((s = launch(i, stream))) return s;
        }
        return SCHEDX_OK;
    }
    const int shifted = int(regions.size()) - 1;  // 1..3, a side stream each
    void *sides[kMaxSideStreams] = {};
    if ((s = cuda_fork_side_streams(ctx, stream, shifted, sides))) return s;
    s = SCHEDX_OK;
    for (int i = 1; i <= shifted && !s; i++) s = launch(size_t(i), sides[i - 1]);
    if (!s) s = launch(0, stream);
    const schedx_status joined = cuda_join_side_streams(ctx, stream, shifted);  // also after a failed launch
    return s ? s : joined;
}

// Runs a checked cast of a non-empty x by variant `v`, then the amax pass where the call
// wants amax and `v` has no fused amax (it takes the workspace lock itself, after the cast's).
schedx_status run_cast(const CheckedCast &cc, const Variant *v, void *stream) {
    const CastTransposeCall &c = cc.c;
    const TileShape t = tile_shape(*v);
    const std::vector<TileRegion> regions = v->param("schedule") == "cuda_tiled"
                                                ? cover_with_tiles(c.m, c.k, t.m, t.k)
                                                : std::vector<TileRegion>{{0, 0, c.m, c.k}};
    if (const schedx_status s = launch_regions(cc, *v, regions, t, stream)) return s;
    if ((c.amax || c.scale_inv) && v->param("with_amax") != "true") {
        return run_amax_pass(cc.dev, cc.in_type, c, stream, cc.ctx);
    }
    return SCHEDX_OK;
}

// scale and scale_inv from amax by torchao's tensorwise rule (current_scale pipeline).
schedx_status run_current_scale(const CheckedCast &cc, float *scale, int pow2_scales, void *stream) {
    const auto &found = candidates("current_scale", cc.dev, "", [](const Variant &) { return true; });
    if (found.empty()) return fail(SCHEDX_ERR_NO_VARIANT, "no current_scale variant");
    PipelineCall call(*found.front(), stream, cc.ctx);
    call.bind_scalar_buffer("amax", cc.c.amax);
    call.bind_int("fp8_format", cc.c.format);
    call.bind_int("pow2_scales", pow2_scales != 0);
    call.bind_scalar_buffer("scales.0", scale);
    call.bind_scalar_buffer("scales.1", cc.c.scale_inv);
    return call.run();
}

}  // namespace
}  // namespace schedx

extern "C" schedx_status schedx_cast_transpose_fp8(const void *x, int64_t m, int64_t k, int64_t ldx,
                                                   schedx_dtype x_dtype, const float *scale,
                                                   schedx_fp8_format format, uint8_t *rows, int64_t ld_rows,
                                                   uint8_t *cols, int64_t ld_cols, float *amax, float *scale_inv,
                                                   schedx_device device, void *stream) {
    using namespace schedx;
    clear_error();
    CheckedCast cc;
    schedx_status s = check_cast(x, m, k, ldx, x_dtype, scale, ScaleRole::multiplier, format, rows, ld_rows, cols,
                                 ld_cols, amax, scale_inv, device, &cc);
    if (s) return s;
    if (m == 0 || k == 0) return amax ? run_amax_pass(cc.dev, cc.in_type, cc.c, stream, cc.ctx) : SCHEDX_OK;
    const Variant *v = nullptr;
    return (s = choose_cast_variant(cc, &v)) ? s : run_cast(cc, v, stream);
}

extern "C" schedx_status schedx_cast_transpose_fp8_divide(const void *x, int64_t m, int64_t k, int64_t ldx,
                                                          schedx_dtype x_dtype, const float *divisor,
                                                          schedx_fp8_format format, uint8_t *rows, int64_t ld_rows,
                                                          uint8_t *cols, int64_t ld_cols, schedx_device device,
                                                          void *stream) {
    using namespace schedx;
    clear_error();
    CheckedCast cc;
    schedx_status s = check_cast(x, m, k, ldx, x_dtype, divisor, ScaleRole::divisor, format, rows, ld_rows, cols,
                                 ld_cols, nullptr, nullptr, device, &cc);
    if (s || m == 0 || k == 0) return s;
    const Variant *v = nullptr;
    return (s = choose_cast_variant(cc, &v)) ? s : run_cast(cc, v, stream);
}

extern "C" schedx_status schedx_cast_transpose_fp8_current_scaling(const void *x, int64_t m, int64_t k, int64_t ldx,
                                                                   schedx_dtype x_dtype, schedx_fp8_format format,
                                                                   int pow2_scales, uint8_t *rows, int64_t ld_rows,
                                                                   uint8_t *cols, int64_t ld_cols, float *amax,
                                                                   float *scale, float *scale_inv,
                                                                   schedx_device device, void *stream) {
    using namespace schedx;
    clear_error();
    if (!amax || !scale_inv) {
        return fail(SCHEDX_ERR_NULL_POINTER, "amax, scale and scale_inv are required: current scaling writes them");
    }
    CheckedCast cc;
    schedx_status s = check_cast(x, m, k, ldx, x_dtype, scale, ScaleRole::written, format, rows, ld_rows, cols,
                                 ld_cols, amax, scale_inv, device, &cc);
    if (s) return s;
    // The cast's variant first (a refusal writes nothing), then amax (0 for an empty x), the
    // scale from it and the cast with that scale: in stream order on CUDA, no copy to the host.
    const bool empty = m == 0 || k == 0;
    CheckedCast cast = cc;
    cast.c.amax = cast.c.scale_inv = nullptr;  // written before the cast, not by it
    const Variant *v = nullptr;
    if (!empty && (s = choose_cast_variant(cast, &v))) return s;
    if ((s = write_amax(cc.dev, cc.in_type, cc.c, stream, cc.ctx)) ||
        (s = run_current_scale(cc, scale, pow2_scales, stream)) || empty) {
        return s;
    }
    return run_cast(cast, v, stream);
}
