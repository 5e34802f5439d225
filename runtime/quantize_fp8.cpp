// schedx_quantize_fp8: validation, variant eligibility and the call.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <mutex>
#include <string>
#include <vector>

#include "cuda_interop.h"
#include "dispatch.h"
#include "pipeline_call.h"
#include "registry.h"
#include "quantize_fp8_call.h"
#include "quantize_fp8_layout.h"
#include "status.h"
#include "validate.h"

namespace schedx {
namespace {

const char *recipe_name(schedx_fp8_recipe r) {
    switch (r) {
    case SCHEDX_RECIPE_BLOCK_1X128: return "block1d";
    case SCHEDX_RECIPE_BLOCK_128X128: return "block2d";
    case SCHEDX_RECIPE_MXFP8: return "mx";
    case SCHEDX_RECIPE_AXISWISE: return "axis";
    default: return nullptr;
    }
}

// Both without overflow for any size >= 0 (a caller may pass sizes near INT64_MAX, which
// the span checks then refuse); pad4 saturates where the multiple of 4 does not exist.
int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0); }
int64_t pad4(int64_t n) { return n > INT64_MAX - 3 ? INT64_MAX : ceil_div(n, 4) * 4; }

}  // namespace

ScaleShape scale_shape(schedx_fp8_recipe r, int64_t m, int64_t k, bool columnwise) {
    switch (r) {
    case SCHEDX_RECIPE_BLOCK_1X128:
        return columnwise ? ScaleShape{ceil_div(m, 128), pad4(k)} : ScaleShape{ceil_div(k, 128), pad4(m)};
    case SCHEDX_RECIPE_BLOCK_128X128:
        return columnwise ? ScaleShape{ceil_div(k, 128), pad4(ceil_div(m, 128))}
                          : ScaleShape{ceil_div(m, 128), pad4(ceil_div(k, 128))};
    case SCHEDX_RECIPE_AXISWISE:
        return columnwise ? ScaleShape{1, k} : ScaleShape{m, 1};
    default:
        return columnwise ? ScaleShape{k, ceil_div(m, 32)} : ScaleShape{m, ceil_div(k, 32)};
    }
}

void bind(PipelineCall &call, const QuantizeCall &c) {
    call.bind_matrix("input", c.x, c.m, c.k, c.ldx, c.elem_bytes);
    call.bind_int("fp8_format", c.opt.format);
    call.bind_int("pow2_scales", c.opt.pow2_scales);
    int32_t eps_bits;
    std::memcpy(&eps_bits, &c.opt.epsilon, 4);
    call.bind_int("epsilon_bits", eps_bits);
    call.bind_int("mx_rceil", c.opt.mx_mode == SCHEDX_MX_RCEIL);
    call.bind_matrix("rows", c.rows, c.m, c.k, c.ld_rows, 1);
    call.bind_matrix("cols", c.cols, c.k, c.m, c.ld_cols, 1);
    call.bind_matrix("rows_scale", c.rows_scale, c.rs.rows, c.rs.cols, c.rs.cols, c.scale_bytes);
    call.bind_matrix("cols_scale", c.cols_scale, c.cs.rows, c.cs.cols, c.cs.cols, c.scale_bytes);
}

namespace {

bool aligned(const void *p, uintptr_t n) { return reinterpret_cast<uintptr_t>(p) % n == 0; }

// vector_io: x in vectors of kVectorElems 16-bit elements, the codes in words of as many
// (generators/quantize_fp8_layout.h).
bool vectors_fit(const Variant &v, const QuantizeCall &c) {
    constexpr int n = quantize_layout::kVectorElems;
    return v.param("vector_io") != "true" ||
           (aligned(c.x, 2 * n) && c.ldx % n == 0 && (!c.rows || (aligned(c.rows, n) && c.ld_rows % n == 0)) &&
            (!c.cols || (aligned(c.cols, n) && c.ld_cols % n == 0)));
}

// The second pass of a tiled axiswise call: the first quantize_fp8_axis_codes variant of the
// dtype and format that the device (compute capability `sm`) runs and whose vectors fit the
// call, or the one schedx_force_variant names for that op; null if none.
const Variant *axis_codes_variant(const std::string &in_type, const QuantizeCall &c, int sm) {
    const std::string fp8 = c.opt.format == SCHEDX_E5M2 ? "e5m2" : "e4m3";
    const auto &codes = candidates("quantize_fp8_axis_codes", Device::cuda, in_type + ":" + fp8,
                                   [&](const Variant &v) { return v.param("in_type") == in_type && v.param("fp8") == fp8; });
    const std::string forced = forced_variant("quantize_fp8_axis_codes");
    for (const Variant *v : codes) {
        if (v->min_sm <= sm && vectors_fit(*v, c) && (forced.empty() || v->name == forced)) return v;
    }
    return nullptr;
}

// Tiled variants take whole tiles (quantize_fp8_layout.h: 128 x 128; block2d M and K multiples
// of 512, so that its scale arrays have no padding); the general ones any shape. A tiled axiswise first pass
// needs a second that the device runs.
bool can_run(const Variant &v, const QuantizeCall &c, int sm) {
    if (v.param("schedule") != "cuda_tiled") return true;
    if (v.param("axis_pass") == "maxima" && !axis_codes_variant(std::string(v.param("in_type")), c, sm)) {
        return false;
    }
    const int64_t whole = quantize_layout::whole_tiles(v.param("recipe") == "block2d");
    return c.m % whole == 0 && c.k % whole == 0 && vectors_fit(v, c);
}

// Axiswise in two passes (variants with axis_pass first): the first writes rows, its scales
// and each column's maximum over every strip of strip_rows rows into scratch (the stream's
// workspace on CUDA, held for both passes; a host allocation on the CPU), the second
// (the first quantize_fp8_axis_cols variant of the device and dtype) reduces those maxima
// and writes cols and its scales.
schedx_status run_axis_two_passes(const Variant &first, const QuantizeCall &c, Device dev, const char *in_type,
                                  void *stream, void *ctx) {
    // Looked up once per device and dtype (candidates memoises by key).
    const auto &second = candidates("quantize_fp8_axis_cols", dev, in_type,
                                    [&](const Variant &v) { return v.param("in_type") == in_type; });
    if (second.empty()) return fail(SCHEDX_ERR_NO_VARIANT, std::string("no quantize_fp8_axis_cols variant for ") + in_type);
    const int64_t strips = ceil_div(c.m, first.param_int("strip_rows", quantize_layout::kStripRows));
    const size_t words = size_t(strips) * size_t(c.k);
    std::unique_ptr<uint32_t[]> host;
    std::unique_lock<std::mutex> workspace_lock;
    void *partials = nullptr;
    schedx_status s;
    if (dev == Device::cpu) {
        host.reset(new (std::nothrow) uint32_t[words]);  // every word is written by the first pass
        if (!host) return fail(SCHEDX_ERR_KERNEL, "cannot allocate " + std::to_string(words * 4) + " bytes of column maxima");
        partials = host.get();
    } else {
        workspace_lock = lock_stream_workspace(ctx, stream);
        if ((s = cuda_workspace(ctx, stream, words * 4, &partials))) return s;
    }
    for (const Variant *pass : {&first, second.front()}) {
        PipelineCall call(*pass, stream, ctx);
        bind(call, c);
        call.bind_matrix("col_partials", partials, strips, c.k, c.k, 4);
        if ((s = call.run())) return s;
    }
    return SCHEDX_OK;
}

// Axiswise in tiles (variants with axis_pass maxima, CUDA): the first pass's atomics take
// each row's and column's maximum into row_max [M] and col_max [K] (the stream's workspace,
// zeroed first, held for both passes); the second (axis_codes_variant) writes rows, cols and
// both scale arrays from them.
schedx_status run_axis_tiled(const Variant &first, const QuantizeCall &c, const char *in_type, void *stream, void *ctx) {
    const Variant *second = axis_codes_variant(in_type, c, cuda_context_sm(ctx));
    if (!second) return fail(SCHEDX_ERR_NO_VARIANT, std::string("no quantize_fp8_axis_codes variant for ") + in_type);
    // The sinks the atomics are stored to: [K/T][M] and [M/T][K] bytes (whole tiles).
    constexpr int T = quantize_layout::kTile;
    const size_t maxima = size_t(c.m) + size_t(c.k), row_sink = size_t(c.k / T) * size_t(c.m);
    const size_t bytes = maxima * 4 + row_sink + size_t(c.m / T) * size_t(c.k);
    std::unique_lock<std::mutex> workspace_lock = lock_stream_workspace(ctx, stream);
    void *workspace = nullptr;
    schedx_status s;
    if ((s = cuda_workspace(ctx, stream, bytes, &workspace)) || (s = cuda_fill_words(ctx, stream, workspace, maxima, 0))) {
        return s;
    }
    uint32_t *const row_max = static_cast<uint32_t *>(workspace), *const col_max = row_max + c.m;
    uint8_t *const sinks = reinterpret_cast<uint8_t *>(col_max + c.k);
    {
        PipelineCall call(first, stream, ctx);
        bind(call, c);
        call.bind_address("row_max_address", row_max);
        call.bind_address("col_max_address", col_max);
        call.bind_matrix("row_sink", sinks, c.k / T, c.m, c.m, 1);
        call.bind_matrix("col_sink", sinks + row_sink, c.m / T, c.k, c.k, 1);
        if ((s = call.run())) return s;
    }
    PipelineCall call(*second, stream, ctx);
    bind(call, c);
    call.bind_vector("row_max", row_max, c.m, 4);
    call.bind_vector("col_max", col_max, c.k, 4);
    return call.run();
}

schedx_status check_options(const schedx_quantize_fp8_options *o) {
    schedx_status s;
    if ((s = check_not_null("options", o))) return s;
    if (!recipe_name(o->recipe)) {
        return fail(SCHEDX_ERR_UNSUPPORTED_FORMAT,
                    "options->recipe " + std::to_string(static_cast<int>(o->recipe)) + " is not a schedx_fp8_recipe");
    }
    if (o->format != SCHEDX_E4M3FN && o->format != SCHEDX_E5M2) {
        return fail(SCHEDX_ERR_UNSUPPORTED_FORMAT,
                    "options->format " + std::to_string(static_cast<int>(o->format)) + " is not e4m3fn or e5m2");
    }
    if (o->recipe == SCHEDX_RECIPE_MXFP8) {
        if (o->mx_mode != SCHEDX_MX_FLOOR && o->mx_mode != SCHEDX_MX_RCEIL) {
            return fail(SCHEDX_ERR_UNSUPPORTED_FORMAT, "options->mx_mode " +
                                                           std::to_string(static_cast<int>(o->mx_mode)) +
                                                           " is not SCHEDX_MX_FLOOR or SCHEDX_MX_RCEIL");
        }
    } else {
        if (o->pow2_scales != 0 && o->pow2_scales != 1) {
            return fail(SCHEDX_ERR_UNSUPPORTED_FORMAT,
                        "options->pow2_scales must be 0 or 1, got " + std::to_string(o->pow2_scales));
        }
        if (!(std::isfinite(o->epsilon) && o->epsilon >= 0.0f) || std::signbit(o->epsilon)) {
            return fail(SCHEDX_ERR_UNSUPPORTED_FORMAT,
                        "options->epsilon must be finite and >= +0, got " + std::to_string(o->epsilon));
        }
    }
    return SCHEDX_OK;
}

// An empty x: outputs of no elements may be NULL and nothing is launched, but a scale array
// that still has entries (axiswise: rows_scale [M][1] when K = 0, cols_scale [1][K] when
// M = 0) gets the scale of amax 0, as an empty reduction gives: fp32(fp8_max / 1e-12), its
// power of two with pow2_scales.
schedx_status write_empty_scales(const schedx_quantize_fp8_options &o, int64_t m, int64_t k, void *rows_scale,
                                 void *cols_scale, Device dev, void *stream) {
    const ScaleShape shapes[2] = {scale_shape(o.recipe, m, k, false), scale_shape(o.recipe, m, k, true)};
    void *const arrays[2] = {rows_scale, cols_scale};
    for (int i = 0; i < 2; i++) {
        const int64_t n = shapes[i].rows * shapes[i].cols;
        if (n == 0 || !arrays[i]) continue;
        if (o.recipe != SCHEDX_RECIPE_AXISWISE) {  // the block recipes' arrays follow x's blocks
            return fail(SCHEDX_ERR_KERNEL, "an empty x left a non-empty scale array");
        }
        const double fp8_max = o.format == SCHEDX_E5M2 ? 57344.0 : 448.0;
        uint32_t bits = 0;
        const float scale = float(fp8_max / 1e-12);
        std::memcpy(&bits, &scale, 4);
        if (o.pow2_scales) bits &= 0xFF800000u;
        std::vector<Span> spans{{i ? "cols_scale" : "rows_scale", arrays[i], 1, n, n, 4, true}};
        void *ctx = nullptr;
        schedx_status s;
        if ((s = check_spans(spans, dev, &ctx))) return s;
        if (dev == Device::cuda) {
            if ((s = cuda_fill_words(ctx, stream, arrays[i], size_t(n), bits))) return s;
        } else {
            std::fill_n(static_cast<uint32_t *>(arrays[i]), n, bits);
        }
    }
    return SCHEDX_OK;
}

}  // namespace
}  // namespace schedx

extern "C" schedx_status schedx_quantize_fp8_scale_shape(schedx_fp8_recipe recipe, int64_t m, int64_t k,
                                                         int columnwise, int64_t *n_rows, int64_t *n_cols) {
    using namespace schedx;
    clear_error();
    schedx_status s;
    if ((s = check_not_null("n_rows", n_rows)) || (s = check_not_null("n_cols", n_cols))) return s;
    if (!recipe_name(recipe)) {
        return fail(SCHEDX_ERR_UNSUPPORTED_FORMAT,
                    "recipe " + std::to_string(static_cast<int>(recipe)) + " is not a schedx_fp8_recipe");
    }
    if (m < 0 || k < 0) return fail(SCHEDX_ERR_BAD_SIZE, "m and k must be >= 0");
    const ScaleShape sh = scale_shape(recipe, m, k, columnwise != 0);
    *n_rows = sh.rows;
    *n_cols = sh.cols;
    return SCHEDX_OK;
}

extern "C" schedx_status schedx_quantize_fp8(const void *x, int64_t m, int64_t k, int64_t ldx, schedx_dtype x_dtype,
                                             const schedx_quantize_fp8_options *options, uint8_t *rows,
                                             int64_t ld_rows, void *rows_scale, uint8_t *cols, int64_t ld_cols,
                                             void *cols_scale, schedx_device device, void *stream) {
    using namespace schedx;
    clear_error();
    Device dev;
    schedx_status s;
    if ((s = check_device(device, &dev)) || (s = check_options(options))) return s;
    if (m < 0 || k < 0) {
        return fail(SCHEDX_ERR_BAD_SIZE, "m and k must be >= 0, got " + std::to_string(m) + " and " + std::to_string(k));
    }
    const char *in_type = x_dtype == SCHEDX_BF16 ? "bf16" : x_dtype == SCHEDX_FP16 ? "fp16" : x_dtype == SCHEDX_FP32 ? "fp32" : nullptr;
    if (!in_type) {
        return fail(SCHEDX_ERR_UNSUPPORTED_DTYPE,
                    "x_dtype " + std::to_string(static_cast<int>(x_dtype)) + " is not bf16, fp16 or fp32");
    }
    if (m == 0 || k == 0) return write_empty_scales(*options, m, k, rows_scale, cols_scale, dev, stream);
    if (!rows && !cols) return fail(SCHEDX_ERR_NULL_POINTER, "rows and cols are both NULL: nothing to write");
    if (rows && !rows_scale) return fail(SCHEDX_ERR_NULL_POINTER, "rows is given without rows_scale");
    if (cols && !cols_scale) return fail(SCHEDX_ERR_NULL_POINTER, "cols is given without cols_scale");
    if ((s = check_not_null("x", x)) || (s = check_leading_dim("ldx", ldx, "k", k)) ||
        (rows && (s = check_leading_dim("ld_rows", ld_rows, "k", k))) ||
        (cols && (s = check_leading_dim("ld_cols", ld_cols, "m", m)))) {
        return s;
    }
    const schedx_quantize_fp8_options &o = *options;
    const int elem_bytes = x_dtype == SCHEDX_FP32 ? 4 : 2;
    const int scale_bytes = o.recipe == SCHEDX_RECIPE_MXFP8 ? 1 : 4;
    const ScaleShape rs = scale_shape(o.recipe, m, k, false), cs = scale_shape(o.recipe, m, k, true);
    std::vector<Span> spans{{"x", x, m, k, ldx, elem_bytes, false}};
    if (rows) {
        spans.push_back({"rows", rows, m, k, ld_rows, 1, true});
        spans.push_back({"rows_scale", rows_scale, rs.rows, rs.cols, rs.cols, scale_bytes, true});
    }
    if (cols) {
        spans.push_back({"cols", cols, k, m, ld_cols, 1, true});
        spans.push_back({"cols_scale", cols_scale, cs.rows, cs.cols, cs.cols, scale_bytes, true});
    }
    void *ctx = nullptr;
    if ((s = check_spans(spans, dev, &ctx))) return s;

    const QuantizeCall c{x, m, k, ldx, elem_bytes, o, rows, cols, ld_rows, ld_cols, rows_scale, cols_scale, rs, cs,
                         scale_bytes};
    const std::string recipe = recipe_name(o.recipe);
    const std::string outputs = rows && cols ? "both" : (rows ? "rows" : "cols");
    const std::string fp8_name = o.format == SCHEDX_E5M2 ? "e5m2" : "e4m3";
    const Workload w{"quantize_fp8",
                     std::string(in_type) + "->" + (o.format == SCHEDX_E5M2 ? "e5m2" : "e4m3fn") + ":" + recipe + ":" +
                         outputs,
                     dev,
                     {m, k}};
    const std::vector<const Variant *> &candidates = schedx::candidates(w.op, dev, w.dtypes, [&](const Variant &v) {
        const std::string_view fp8 = v.param("fp8", "any");
        return v.param("recipe") == recipe && v.param("in_type") == in_type &&
               v.param("outputs", "both") == outputs && (fp8 == "any" || fp8 == fp8_name);
    });
    const RunKey key{m, k, ldx, rows ? ld_rows : -1, cols ? ld_cols : -1, elem_bytes, aligned16(x),
                     !rows || aligned16(rows), !cols || aligned16(cols)};
    const int sm = cuda_context_sm(ctx);
    const auto runnable = runnable_variants(candidates, key, sm, [&](const Variant &v) { return can_run(v, c, sm); },
                                            [&](const Variant &v) { return cpu_tile_rank(v, m, k); });
    const Variant *v = nullptr;
    if ((s = choose_variant(w, candidates, runnable, &v))) return s;

    if (v->param("axis_pass") == "first") return run_axis_two_passes(*v, c, dev, in_type, stream, ctx);
    if (v->param("axis_pass") == "maxima") return run_axis_tiled(*v, c, in_type, stream, ctx);
    PipelineCall call(*v, stream, ctx);
    bind(call, c);
    return call.run();
}
