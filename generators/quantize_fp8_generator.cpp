// fp8 quantization with per-block scales, both GEMM orientations from one algorithm:
//   rows = fp8(x * s_row)   row-major [M, K], a scale per block along K
//   cols = fp8(x * s_col)   [K, M] (x transposed), a scale per block along M
// recipe block1d (TransformerEngine Float8BlockScaling, 1 x 128 blocks), block2d (128 x 128
// blocks: one scale for both, cols is the byte transpose of rows), mx (OCP MXFP8: 1 x 32 and
// 32 x 1 blocks, E8M0 scales), axis (torchao's rowwise recipe: a scale per row of x for
// rows, per column for cols). Layouts and rules: docs/quantize_fp8.md. x is [M, K]; K is
// the contiguous dimension, called x here, M is called y. Blocks overhanging a ragged edge
// reduce over the elements that exist.
//
// Where the references differ, each recipe follows one:
// - block1d / block2d follow TE's kernels (quantize_transpose_{vector,square}_blockwise.cu,
//   compute_scale_from_amax): amax by fmaxf, so NaN is ignored; amax = 0, inf or NaN gives
//   scale 1; an amax below epsilon becomes epsilon; an infinite fp8_max / amax becomes the
//   input dtype's largest finite value; power-of-two scales by masking the mantissa;
//   scale_inv = 1 / scale correctly rounded. TE's Python reference differs at amax = inf
//   (scale 0 there) and propagates NaN through torch.amax.
// - mx follows torchao's to_mx (FLOOR) and _to_mx_rceil (RCEIL): amax propagates NaN. FLOOR:
//   byte = clamp(exponent(amax) - emax, -127, 128) + 127 (inf: its exponent 128), 255 for NaN;
//   elements divided by max(2^(byte - 127), 2^-126), so byte 0 scales by 2^126 and byte 255
//   divides by inf (finite elements become signed zeros, others NaN). RCEIL: the exact
//   round-up of amax / fp8_max (TE; sm_100's cvt.rp; torchao's eager fp32 log2 rounds down
//   descales a few ulps above a power of two), 254 for inf, 255 for NaN; elements times
//   2^(127 - byte), times 1 at byte 0 and 2^-127 at 254, NaN at 255.
// - axis follows torchao's amax_to_scale: NaN propagates into the scale (NaN codes), amax inf
//   gives scale 0; power-of-two scales by masking (see axis_scale_bits for where torchao's
//   exp2(floor(log2(s))) can differ).
//
// Halide asks for denormals flushed to zero on the GPU (Halide 21's PTX holds no .ftz, but
// nothing promises that), the references keep them (TE and torch build without ftz). So every
// step whose result could depend on it is exact integer arithmetic or takes no denormal
// operand: the amax is an integer maximum of |x|'s bits, the divisions run in fp64 from
// exactly built operands and round to fp32 by integer code, and off CUDA a subnormal x is
// rebuilt 2^64 larger before it is scaled. On CUDA x * scale is one mul.f32, which rests on
// the PTX having no .ftz (tests/test_launch_limits.cpp checks every kernel).
//
// The tiled CUDA kernels encode with integer arithmetic (any GPU) or, with encoder=ptx, by
// cvt.rn.satfinite.{e4m3,e5m2}x2.f32 on pairs of adjacent elements of an output row (sm_89,
// by the runtime's PTX rewrite). Both round the same fp32 operand: the scaled value, with
// MXFP8's NaN blocks as signed zeros or NaN and (cvt only) subnormals as signed zeros.
#include "Halide.h"
#include "cuda_atomics.h"
#include "numerics.h"
#include "ptx_extern.h"
#include "quantize_fp8_layout.h"

namespace {

using namespace Halide;
using schedx::bits_of;
using schedx::ElemType;
using schedx::double_of_normal;
using schedx::float_bits_of;
using schedx::float_bits_of_double;
using schedx::u32;
using schedx::u64;

enum class Recipe { block1d, block2d, mx, axis };
enum class Outputs { both, rows, cols };
// Axiswise in one pipeline (x read for each maximum and each copy), or in two: the first
// writes rows, its scales and per-strip column maxima, the second cols from those maxima;
// maxima / codes: the same two passes in 128 x 128 tiles (generate_axis_tiled).
enum class AxisPass { single, first, second, maxima, codes };

// The largest finite value of the input dtype (TE's value_for_inf).
uint32_t max_finite_bits(ElemType t) {
    switch (t) {
    case ElemType::bf16: return 0x7F7F0000u;
    case ElemType::fp16: return 0x477FE000u;  // 65504
    case ElemType::fp32: return 0x7F7FFFFFu;
    }
    return 0;
}

class QuantizeFp8 : public Generator<QuantizeFp8> {
public:
    GeneratorParam<Recipe> recipe{"recipe", Recipe::block1d,
                                  {{"block1d", Recipe::block1d}, {"block2d", Recipe::block2d}, {"mx", Recipe::mx}, {"axis", Recipe::axis}}};
    GeneratorParam<ElemType> in_type{"in_type", ElemType::bf16, schedx::elem_type_names()};
    GeneratorParam<Outputs> outputs{"outputs", Outputs::both,
                                    {{"both", Outputs::both}, {"rows", Outputs::rows}, {"cols", Outputs::cols}}};
    // any: format chosen by the fp8_format argument; e4m3 / e5m2: fixed.
    GeneratorParam<std::string> fp8{"fp8", "any"};
    // cpu | cuda_general (any shape) | cuda_tiled (whole 128 x 128 tiles, one per block) |
    // cuda_strips (axis_pass first)
    GeneratorParam<std::string> sched{"schedule", "cpu"};
    GeneratorParam<int> rows_per_thread{"rows_per_thread", 16};  // cuda_tiled: rows (cols: columns) per thread
    // cpu: 0, each block-scale instance at root and each output in 64 x 64 tiles; else both
    // outputs, their block scales and scale arrays per tile_rows x tile tile (whole blocks).
    GeneratorParam<int> tile{"tile", 0};
    GeneratorParam<int> tile_rows{"tile_rows", 128};
    GeneratorParam<int> pad_elems{"pad_elems", 2};               // cuda_tiled: shared-memory row padding
    // cuda_tiled: a thread's 4 elements of x per row as one 8-byte load, and its 4 codes of a
    // rows row or cols column as one 32-bit word (rows and cols are word buffers); x 8-byte
    // and the outputs 4-byte aligned, row pitches in those steps (the runtime checks).
    GeneratorParam<bool> vector_io{"vector_io", false};
    GeneratorParam<AxisPass> axis_pass{"axis_pass", AxisPass::single,
                                       {{"single", AxisPass::single}, {"first", AxisPass::first}, {"second", AxisPass::second},
                                        {"maxima", AxisPass::maxima}, {"codes", AxisPass::codes}}};
    GeneratorParam<int> strip_rows{"strip_rows", schedx::quantize_layout::kStripRows};  // axis_pass first: rows of x per column-partial maximum
    // cuda_tiled: integer (arithmetic, any GPU) | ptx (cvt.rn.satfinite pairs, sm_89, by the
    // runtime's PTX rewrite; needs a fixed fp8), as the cast generator's parameter.
    GeneratorParam<std::string> encoder{"encoder", "integer"};
    // cuda_tiled block2d: threads reducing the 128 x 128 block maximum, 128 (a column each, then
    // one thread over their 128) or 256 (an 8 x 8 patch each, 16 threads over 16 patches, then one).
    GeneratorParam<int> block_max_lanes{"block_max_lanes", 128};
    // cuda_tiled block2d, vector_io: cols as the PRMT transpose of rows' code words staged in shared
    // memory (each element encoded once; 50 KiB of shared memory, which the runtime opts in to).
    GeneratorParam<bool> cols_from_rows{"cols_from_rows", false};
    // The algorithm of `schedule` under Halide's default schedule, the block maxima computed
    // once (by default each output element would recompute its block's): tests build the tiled
    // CUDA algorithm (encoder=ptx included) for the CPU, linking C stand-ins for the schedx_ptx_
    // functions (tests/test_quantize_cvt_cpu.cpp). No variant sets it.
    GeneratorParam<bool> default_schedule{"default_schedule", false};

    Input<int> fp8_format{"fp8_format"};  // 0 e4m3fn, 1 e5m2
    Input<int> pow2_scales{"pow2_scales"};  // block recipes: round scales down to a power of two
    Input<int> epsilon_bits{"epsilon_bits"};  // block recipes: fp32 bits of TE's epsilon (>= 0)
    Input<int> mx_rceil{"mx_rceil"};  // mx: 0 FLOOR, 1 RCEIL

    void configure() {
        const Type t = in_type == ElemType::fp32 ? Float(32) : UInt(16);
        input = add_input<Buffer<>>("input", t, 2);
        const Type scale_t = recipe == Recipe::mx ? UInt(8) : Float(32);
        if (vector_io && sched.value() != "cuda_tiled" && !default_schedule) throw std::invalid_argument("vector_io takes cuda_tiled");
        // vector_io: four codes per word, the lowest address in the low byte.
        const Type code_t = vector_io ? UInt(32) : UInt(8);
        if (cols_from_rows && !(recipe == Recipe::block2d && sched.value() == "cuda_tiled" && vector_io && outputs == Outputs::both)) {
            throw std::invalid_argument("cols_from_rows takes recipe block2d, schedule cuda_tiled, vector_io and both outputs");
        }
        if (block_max_lanes != 128 && !(block_max_lanes == 256 && recipe == Recipe::block2d)) {
            throw std::invalid_argument("block_max_lanes: 128, or 256 for recipe block2d");
        }
        if (tile != 0) {
            const int B = recipe == Recipe::mx ? 32 : 128;
            if (sched.value() != "cpu" || recipe == Recipe::axis || outputs != Outputs::both || tile % B != 0 ||
                tile_rows % B != 0 || tile <= 0 || tile_rows <= 0) {
                throw std::invalid_argument("tile: schedule cpu, a block recipe, both outputs, whole blocks per tile");
            }
        }
        if (axis_pass != AxisPass::single && (recipe != Recipe::axis || outputs != Outputs::both)) {
            throw std::invalid_argument("axis_pass other than single: recipe axis with both outputs only");
        }
        if (tiled_axis() && (sched.value() != "cuda_tiled" || in_type == ElemType::fp32)) {
            throw std::invalid_argument("axis_pass maxima / codes: schedule cuda_tiled, 16-bit inputs");
        }
        if (axis_pass == AxisPass::maxima) {
            // The tiled axiswise pass 1: each 128 x 128 tile's row and column maxima, by atomic
            // max into row_max [M] and col_max [K] (float bits of |x|, zeroed by the runtime).
            // The sinks ([K/128][M] and [M/128][K] bytes, a workspace) carry the atomics.
            row_max_address = add_input<uint64_t>("row_max_address");
            col_max_address = add_input<uint64_t>("col_max_address");
            row_sink = add_output<Buffer<>>("row_sink", UInt(8), 2);
            col_sink = add_output<Buffer<>>("col_sink", UInt(8), 2);
            return;
        }
        if (axis_pass == AxisPass::codes) {  // pass 2: the maxima pass 1 left
            row_max_in = add_input<Buffer<>>("row_max", UInt(32), 1);
            col_max_in = add_input<Buffer<>>("col_max", UInt(32), 1);
        }
        // col_partials: [ceil(M / strip_rows)][K], the maximum of |x|'s bits over each strip of
        // strip_rows rows of each column (NaN bits exceed inf's, so a NaN stays in them).
        if (axis_pass == AxisPass::second) col_partials_in = add_input<Buffer<>>("col_partials", UInt(32), 2);
        if (outputs != Outputs::cols && axis_pass != AxisPass::second) {
            rows = add_output<Buffer<>>("rows", code_t, 2);
            rows_scale = add_output<Buffer<>>("rows_scale", scale_t, 2);
        }
        if (outputs != Outputs::rows && axis_pass != AxisPass::first) {
            cols = add_output<Buffer<>>("cols", code_t, 2);
            cols_scale = add_output<Buffer<>>("cols_scale", scale_t, 2);
        }
        if (axis_pass == AxisPass::first) col_partials_out = add_output<Buffer<>>("col_partials", UInt(32), 2);
    }

    void generate() {
        // THE ALGORITHM
        Expr is_e5m2 = fp8_format_is_e5m2();
        if (encoder.value() == "ptx" && (sched.value() != "cuda_tiled" || fp8.value() == "any")) {
            throw std::invalid_argument("encoder=ptx needs schedule cuda_tiled and fp8=e4m3 or e5m2");
        }
        define_elements();
        if (tiled_axis()) {
            generate_axis_tiled();
            return;
        }
        if (recipe == Recipe::axis) {
            generate_axiswise(is_e5m2);
            return;
        }
        define_block_codes(is_e5m2);
        define_scale_arrays();

        // ESTIMATES
        input->set_estimates({{0, 8192}, {0, 8192}});
        fp8_format.set_estimate(0);
        pow2_scales.set_estimate(1);
        epsilon_bits.set_estimate(0);
        mx_rceil.set_estimate(1);
        for (Output<Buffer<>> *o : {rows, cols}) {
            if (o) o->set_estimates({{0, 8192}, {0, 8192}});
        }
        for (Output<Buffer<>> *o : {rows_scale, cols_scale}) {
            if (o) o->set_estimates({{0, 8192}, {0, 64}});
        }

        // THE SCHEDULE
        schedule();
    }

private:
    // Each element as read, as bits, as a float, and |x| (float bits, and the input's own 16 bits).
    void define_elements() {
        xraw(x, y) = (*input)(x, y);  // what the tiled kernels stage in shared memory
        if (in_type == ElemType::fp32) {
            xbits(x, y) = reinterpret<uint32_t>(xraw(x, y));
        } else {
            xbits(x, y) = cast<uint32_t>(xraw(x, y));
        }
        value(x, y) = schedx::decode_to_float(xbits(x, y), in_type);
        // |x| as float bits: they order like the values. TE's fmaxf skips NaN (a NaN counts
        // as 0); torchao's amax keeps it (NaN bits exceed inf's).
        Expr abs_bits = reinterpret<uint32_t>(value(x, y)) & u32(0x7FFFFFFF);
        if (recipe == Recipe::block1d || recipe == Recipe::block2d) {
            abs_bits = select(abs_bits > u32(0x7F800000), u32(0), abs_bits);
        }
        absx(x, y) = abs_bits;
        if (in_type != ElemType::fp32) {
            // |x| in the input's own 16 bits (they order like |x|, NaN above inf): the tiled
            // kernels' block maxima skip the decode per element and widen the maximum once.
            Expr abs16 = cast<uint32_t>(xraw(x, y)) & u32(0x7FFF);
            const uint32_t inf16 = in_type == ElemType::bf16 ? 0x7F80 : 0x7C00;
            if (recipe == Recipe::block1d || recipe == Recipe::block2d) abs16 = select(abs16 > u32(inf16), u32(0), abs16);
            absx16(x, y) = abs16;
        }
    }

    void define_block_codes(Expr is_e5m2) {
        const int B = recipe == Recipe::mx ? 32 : 128;
        // Each consumer (rows' codes, cols' codes, each scale array) gets its own instance
        // of the block maxima and scales, so that each is computed where its consumer
        // needs it (inside that kernel's blocks on the GPU: nothing in global scratch).
        // Row-oriented instances are indexed (block along K, m), column-oriented ones
        // (k, block along M); block2d's are indexed by block (bx, by) in both.
        const bool square = recipe == Recipe::block2d;
        if (rows) {
            rows_scale_for_q = make_scales("rows_q", true);
            rows_operand(x, y) = rows_scale_for_q.factors.defined()
                                     ? by_factors(value(x, y), rows_scale_for_q.factors(x / B, y))
                                     : scaled_in_block(value(x, y), square ? rows_scale_for_q.scale(x / B, y / B)
                                                                           : rows_scale_for_q.scale(x / B, y));
            rows_q(x, y) = encoded(rows_operand, rows_pairs, true, is_e5m2);
            if (cols_from_rows) {
                rows_words(x, y) = code_word(rows_q, rows_pairs, true);
                (*rows)(x, y) = rows_words(x, y);
            } else {
                (*rows)(x, y) = vector_io ? code_word(rows_q, rows_pairs, true) : rows_q(x, y);
            }
        }
        if (cols) define_cols_codes(is_e5m2);
    }

    void define_cols_codes(Expr is_e5m2) {
        const int B = recipe == Recipe::mx ? 32 : 128;
        const bool square = recipe == Recipe::block2d;
        // The tiles (CUDA and CPU) compute each scale once per tile and share it between the
        // codes and the scale arrays (block2d: cols is rows' codes transposed).
        if (per_tile() && square && rows) {
            cols_scale_for_q = rows_scale_for_q;
        } else {
            cols_scale_for_q = make_scales("cols_q", false);
        }
        if (cols_from_rows) {
            // Word y of cols row x: byte x % 4 of rows' words (x / 4, 4y .. 4y + 3).
            auto word = [&](int j) { return rows_words(x / 4, 4 * y + j); };
            (*cols)(y, x) = schedx::transposed_word(get_target().has_feature(Target::CUDA), word(0), word(1), word(2),
                                                    word(3), x % 4);
        } else {
            cols_operand(x, y) = cols_scale_for_q.factors.defined()
                                     ? by_factors(value(x, y), cols_scale_for_q.factors(x, y / B))
                                     : scaled_in_block(value(x, y), square ? cols_scale_for_q.scale(x / B, y / B)
                                                                           : cols_scale_for_q.scale(x, y / B));
            // cols' rows run along M (y here): its pairs are (x, 2y), (x, 2y + 1).
            cols_q(x, y) = encoded(cols_operand, cols_pairs, false, is_e5m2);
            // block2d: the byte transpose of rows (same scales), encoded again
            (*cols)(y, x) = vector_io ? code_word(cols_q, cols_pairs, false) : cols_q(x, y);
        }
    }

    void define_scale_arrays() {
        const int B = recipe == Recipe::mx ? 32 : 128;
        Expr K = input->dim(0).extent(), M = input->dim(1).extent();
        const bool tiled = sched.value() == "cuda_tiled";
        // The scale arrays. Block recipes: fp32 scale_inv in TE's GEMM-ready layout, the
        // padding (pad4 of the inner extent) written as 0; mx: the E8M0 bytes, no padding.
        Expr KB = (K + B - 1) / B, MB = (M + B - 1) / B;
        if (rows) rows_scale_for_array = per_tile() ? rows_scale_for_q : make_scales("rows_scale", true);
        if (cols) cols_scale_for_array = per_tile() ? cols_scale_for_q : make_scales("cols_scale", false);
        Func rs = rows_scale_for_array.scale, cs = cols_scale_for_array.scale;
        // Each array's dimension along K is the Var x and along M the Var y, whatever its
        // order, so that the tiled kernels can fuse its tile loops with rows' (loop names).
        if (recipe == Recipe::mx) {
            if (rows) (*rows_scale)(x, y) = cast<uint8_t>(rs(x, y));  // [M][KB]
            if (cols) (*cols_scale)(y, x) = cast<uint8_t>(cs(x, y));  // [K][MB]
        } else {
            // Padding entries (index >= n) are 0; `n - 1` clamps their (unused) scale lookup.
            auto inv = [&](Expr i, Expr n, const std::function<Expr(Expr)> &scale_at) {
                return tiled ? scale_inv_or_zero(Expr(true), scale_at(i)) : scale_inv_or_zero(i < n, scale_at(min(i, n - 1)));
            };
            if (recipe == Recipe::block1d) {
                // rows: [KB][pad4(M)], element [kb][m]; cols: [MB][pad4(K)], element [mb][k].
                if (rows) (*rows_scale)(y, x) = inv(y, M, [&](Expr m) { return rs(x, m); });
                if (cols) (*cols_scale)(x, y) = inv(x, K, [&](Expr k) { return cs(k, y); });
            } else {
                // rows: [MB][pad4(KB)], element [mb][kb]; cols: [KB][pad4(MB)], element [kb][mb].
                if (rows) (*rows_scale)(x, y) = inv(x, KB, [&](Expr kb) { return rs(kb, y); });
                if (cols) (*cols_scale)(y, x) = inv(y, MB, [&](Expr mb) { return cs(x, mb); });
            }
        }
    }

    void schedule() {
        if (using_autoscheduler()) return;
        if (default_schedule) {
            for (BlockScales *b : {&rows_scale_for_q, &cols_scale_for_q, &rows_scale_for_array, &cols_scale_for_array}) {
                if (b->amax.defined()) b->amax.compute_root();
            }
            return;
        }
        if (cpu_tiled()) {
            schedule_cpu_tiled();
        } else if (sched.value() == "cpu") {
            schedule_cpu();
        } else if (sched.value() == "cuda_general") {
            schedule_cuda_general();
        } else if (sched.value() == "cuda_tiled") {
            schedule_cuda_tiled();
        } else {
            throw std::invalid_argument("unknown schedule " + sched.value());
        }
    }

    Var x{"x"}, y{"y"}, bx{"bx"}, by{"by"}, xo{"xo"}, yo{"yo"}, xi{"xi"}, yi{"yi"}, xt{"xt"}, yt{"yt"};
    Input<Buffer<>> *input = nullptr, *col_partials_in = nullptr, *row_max_in = nullptr, *col_max_in = nullptr;
    Input<uint64_t> *row_max_address = nullptr, *col_max_address = nullptr;
    Output<Buffer<>> *rows = nullptr, *cols = nullptr, *rows_scale = nullptr, *cols_scale = nullptr;
    Output<Buffer<>> *col_partials_out = nullptr, *row_sink = nullptr, *col_sink = nullptr;
    Func xraw{"xraw"}, xbits{"xbits"}, value{"value"}, absx{"absx"}, absx16{"absx16"};
    Func rows_q{"rows_q"}, cols_q{"cols_q"};
    Func rows_words{"rows_words"};  // cols_from_rows: rows' code words, staged per tile
    Func rows_operand{"rows_operand"}, cols_operand{"cols_operand"};  // the fp32 values each code rounds
    Func rows_pairs{"rows_pairs"}, cols_pairs{"cols_pairs"};  // encoder=ptx: two codes per uint16
    Func row_amax_axis{"row_amax_axis"}, col_amax_axis{"col_amax_axis"};  // axiswise maxima
    Func row_scale_axis{"row_scale_axis"}, strip_col_amax{"strip_col_amax"};  // axis_pass first
    RDom rk_axis, rs_axis;  // along a row; down a strip (axis_pass first)
    // A block maximum (|x| bits) and the block's scale (block recipes: fp32 scale bits;
    // mx: the E8M0 byte, in a uint32), with the reduction domain of the maximum.
    struct BlockScales {
        Func amax, scale;
        RDom r;
        bool along_k;
        Func factors;  // mx in the CUDA and CPU tiles: the block's two fp32 factors (mx_factors)
    };
    BlockScales rows_scale_for_q, cols_scale_for_q, rows_scale_for_array, cols_scale_for_array;

    // Clamped coordinates repeat an element of a ragged edge block (a max is unchanged).
    BlockScales make_scales(const std::string &name, bool along_k) {
        const int B = recipe == Recipe::mx ? 32 : 128;
        Expr K = input->dim(0).extent(), M = input->dim(1).extent();
        BlockScales b{Func(name + "_amax"), Func(name + "_scale"), RDom(), along_k};
        // The tiled kernels see whole tiles only: unclamped coordinates keep their regions
        // constant (clamps made Halide size thread loops by the matrix).
        const bool whole = sched.value() == "cuda_tiled";
        auto kc = [&](Expr e) { return whole ? e : min(e, K - 1); };
        auto mc = [&](Expr e) { return whole ? e : min(e, M - 1); };
        // The tiles reduce 16-bit inputs in their own bits (twice the lanes of a vector on the
        // CPU): widened once per block.
        const bool max16 = in_type != ElemType::fp32 && (whole || cpu_tiled());
        // The CPU tiles keep those maxima in 16 bits: 32 lanes per AVX-512 vector where 32 bits hold 16.
        const Type max_t = max16 && cpu_tiled() ? UInt(16) : UInt(32);
        auto abs_of = [&](Expr k, Expr m) { return cast(max_t, max16 ? absx16(k, m) : absx(k, m)); };
        auto scale_of = [&](Expr amax) {
            return scale_bits_of(max16 ? reinterpret<uint32_t>(schedx::decode_to_float(amax, in_type)) : amax);
        };
        if (recipe == Recipe::block2d) {
            b.r = RDom(0, B, 0, B, name + "_r");
            b.amax(bx, by) = cast(max_t, 0);
            b.amax(bx, by) = max(b.amax(bx, by), abs_of(kc(bx * B + b.r.x), mc(by * B + b.r.y)));
            b.scale(bx, by) = scale_of(b.amax(bx, by));
        } else if (along_k) {
            b.r = RDom(0, B, name + "_r");
            b.amax(bx, y) = cast(max_t, 0);
            b.amax(bx, y) = max(b.amax(bx, y), abs_of(kc(bx * B + b.r), y));
            b.scale(bx, y) = scale_of(b.amax(bx, y));
        } else {
            b.r = RDom(0, B, name + "_r");
            b.amax(x, by) = cast(max_t, 0);
            b.amax(x, by) = max(b.amax(x, by), abs_of(x, mc(by * B + b.r)));
            b.scale(x, by) = scale_of(b.amax(x, by));
        }
        // The CUDA tiles' algorithm built for the CPU (default_schedule: tests) computes them too,
        // and so do the CPU tiles: two products an element where scaled_in_block's selects
        // computed three.
        if (recipe == Recipe::mx && ((whole && (get_target().has_feature(Target::CUDA) || default_schedule)) || cpu_tiled())) {
            Var u = along_k ? bx : x, w = along_k ? y : by;
            b.factors(u, w) = mx_factors(b.scale(u, w));
        }
        return b;
    }

    bool tiled_axis() const { return axis_pass == AxisPass::maxima || axis_pass == AxisPass::codes; }
    bool cpu_tiled() const { return sched.value() == "cpu" && tile != 0; }
    bool per_tile() const { return sched.value() == "cuda_tiled" || cpu_tiled(); }

    // Axiswise in the block recipes' 128 x 128 tiles, two passes that each read x once:
    // - maxima: the tile's row and column maxima (the block1d tiles' 1 x 128 and 128 x 1
    //   block maxima), each into row_max / col_max by one atomic max per tile;
    // - codes: the tile's rows and cols with the scales of those maxima (the block1d tiles,
    //   their block maxima read instead of reduced), and both scale arrays.
    // Scales and codes come from the same expressions as the other axiswise variants.
    void generate_axis_tiled() {
        if (axis_pass == AxisPass::maxima) {
            rows_scale_for_q = make_scales("rows_q", true);
            cols_scale_for_q = make_scales("cols_q", false);
            // The 16-bit maxima widened to float bits (NaN stays above inf: atom.max compares signed).
            auto widened = [&](Expr m16) { return reinterpret<uint32_t>(schedx::decode_to_float(m16, in_type)); };
            auto atomic_max = [&](Input<uint64_t> *address, Expr index, Expr value) {
                Expr at = *address + cast<uint64_t>(index) * 4;
                if (default_schedule) {  // tests: a C stand-in (tests/test_quantize_cvt_cpu.cpp)
                    return cast<uint8_t>(Internal::Call::make(UInt(32), "schedx_test_atomic_max_u32", {at, value},
                                                              Internal::Call::Extern));
                }
                return cast<uint8_t>(schedx::device_atomic_u32_discarded("max", at, value, index));
            };
            // Dimensions as block1d's scale arrays (rows: [K/128][M], cols: [M/128][K]).
            (*row_sink)(y, x) = atomic_max(row_max_address, y, widened(rows_scale_for_q.amax(x, y)));
            (*col_sink)(x, y) = atomic_max(col_max_address, x, widened(cols_scale_for_q.amax(x, y)));
            input->set_estimates({{0, 8192}, {0, 8192}});
            row_sink->set_estimates({{0, 8192}, {0, 64}});
            col_sink->set_estimates({{0, 8192}, {0, 64}});
        } else {
            rows_scale_for_q = BlockScales{Func("rows_q_amax"), Func("rows_q_scale"), RDom(), true};
            cols_scale_for_q = BlockScales{Func("cols_q_amax"), Func("cols_q_scale"), RDom(), false};
            rows_scale_for_q.amax(bx, y) = (*row_max_in)(y);
            cols_scale_for_q.amax(x, by) = (*col_max_in)(x);
            rows_scale_for_q.scale(bx, y) = axis_scale_bits(rows_scale_for_q.amax(bx, y));
            cols_scale_for_q.scale(x, by) = axis_scale_bits(cols_scale_for_q.amax(x, by));
            rows_operand(x, y) = scaled(value(x, y), rows_scale_for_q.scale(x / 128, y));
            cols_operand(x, y) = scaled(value(x, y), cols_scale_for_q.scale(x, y / 128));
            // A NaN scale (NaN maximum) makes NaN operands: code 0x7F from both encoders.
            rows_q(x, y) = encoded(rows_operand, rows_pairs, true, fp8_format_is_e5m2());
            cols_q(x, y) = encoded(cols_operand, cols_pairs, false, fp8_format_is_e5m2());
            (*rows)(x, y) = vector_io ? code_word(rows_q, rows_pairs, true) : rows_q(x, y);
            (*cols)(y, x) = vector_io ? code_word(cols_q, cols_pairs, false) : cols_q(x, y);
            (*rows_scale)(x, y) = reinterpret<float>(axis_scale_bits((*row_max_in)(y)));  // [M][1]
            (*cols_scale)(x, y) = reinterpret<float>(axis_scale_bits((*col_max_in)(x)));  // [1][K]
            input->set_estimates({{0, 8192}, {0, 8192}});
            row_max_in->set_estimates({{0, 8192}});
            col_max_in->set_estimates({{0, 8192}});
            rows->set_estimates({{0, 2048}, {0, 8192}});
            cols->set_estimates({{0, 2048}, {0, 8192}});
            rows_scale->set_estimates({{0, 1}, {0, 8192}});
            cols_scale->set_estimates({{0, 8192}, {0, 1}});
        }
        fp8_format.set_estimate(0);
        pow2_scales.set_estimate(1);
        epsilon_bits.set_estimate(0);
        mx_rceil.set_estimate(1);
        if (using_autoscheduler()) return;
        if (default_schedule) {
            for (BlockScales *b : {&rows_scale_for_q, &cols_scale_for_q}) b->amax.compute_root();
            return;
        }
        schedule_cuda_tiled();
    }

    // Axiswise (torchao's "rowwise" recipe): a scale per row for rows and per column for
    // cols, torchao's amax_to_scale: fp32(fp8_max / max(fp64(amax), 1e-12)), amax propagating
    // NaN (torch.amax), power-of-two scales rounded down. The scale arrays hold the scales
    // themselves (torchao's Float8 tensors keep the scale, not its inverse): rows [M][1],
    // cols [1][K].
    // - axis_pass single: the codes read their scales back from the outputs (no scratch);
    //   on the GPU the maxima are one kernel each, then each copy: x is read four times.
    // - axis_pass first: per strip of strip_rows rows, the row maxima, then rows, its scales
    //   and the strip's column maxima (col_partials): the strip is swept twice in a row, the
    //   second sweep from cache where the strip is still there.
    // - axis_pass second: the column maxima from col_partials, then cols: x read once more.
    void generate_axiswise(Expr is_e5m2) {
        Expr K = input->dim(0).extent(), M = input->dim(1).extent();
        rk_axis = RDom(0, K, "rk");
        RDom rm(0, M, "rm");
        if (rows) {
            row_amax_axis(y) = u32(0);
            row_amax_axis(y) = max(row_amax_axis(y), absx(rk_axis, y));
            if (axis_pass == AxisPass::first) {
                // One instance of the row scales feeds both the codes and the scale array,
                // whose loops are fused (an output read back would be a pass of its own).
                row_scale_axis(y) = axis_scale_bits(row_amax_axis(y));
                (*rows_scale)(x, y) = reinterpret<float>(row_scale_axis(y));
                rows_q(x, y) = axis_quantize(value(x, y), reinterpret<float>(row_scale_axis(y)), is_e5m2);
            } else {
                (*rows_scale)(x, y) = reinterpret<float>(axis_scale_bits(row_amax_axis(y)));
                rows_q(x, y) = axis_quantize(value(x, y), (*rows_scale)(0, y), is_e5m2);
            }
            (*rows)(x, y) = rows_q(x, y);
        }
        if (col_partials_out) {
            // A strip overhanging a ragged M repeats its last row (a max is unchanged).
            rs_axis = RDom(0, strip_rows, "rs");
            strip_col_amax(x, yo) = u32(0);
            strip_col_amax(x, yo) = max(strip_col_amax(x, yo), absx(x, min(yo * strip_rows + rs_axis, M - 1)));
            (*col_partials_out)(x, yo) = strip_col_amax(x, yo);
        }
        // The reduction down the rows (or down the strips' maxima), for the schedules.
        RDom down = col_partials_in ? RDom(0, col_partials_in->dim(1).extent(), "rp") : rm;
        if (cols) {
            col_amax_axis(x) = u32(0);
            col_amax_axis(x) = max(col_amax_axis(x), col_partials_in ? (*col_partials_in)(x, down) : absx(x, down));
            (*cols_scale)(x, y) = reinterpret<float>(axis_scale_bits(col_amax_axis(x)));
            cols_q(x, y) = axis_quantize(value(x, y), (*cols_scale)(x, 0), is_e5m2);
            (*cols)(y, x) = cols_q(x, y);
        }

        input->set_estimates({{0, 8192}, {0, 8192}});
        fp8_format.set_estimate(0);
        pow2_scales.set_estimate(1);
        epsilon_bits.set_estimate(0);
        mx_rceil.set_estimate(1);
        if (rows) {
            rows->set_estimates({{0, 8192}, {0, 8192}});
            rows_scale->set_estimates({{0, 1}, {0, 8192}});
        }
        if (cols) {
            cols->set_estimates({{0, 8192}, {0, 8192}});
            cols_scale->set_estimates({{0, 8192}, {0, 1}});
        }
        if (col_partials_in) col_partials_in->set_estimates({{0, 8192}, {0, 256}});
        if (col_partials_out) col_partials_out->set_estimates({{0, 8192}, {0, 256}});

        if (using_autoscheduler() || default_schedule) return;
        if (axis_pass == AxisPass::first) {
            schedule_axis_first();
            return;
        }
        schedule_axiswise(down);
    }

    // Axiswise in one pass (cpu, cuda_general) or its second pass: `down` the reduction down
    // the rows (or the strips' maxima).
    void schedule_axiswise(RDom down) {
        Var t("t");
        RVar ro("ro"), ri("ri");
        if (sched.value() == "cpu") {
            if (rows) {
                rows_scale->parallel(y);
                row_amax_axis.compute_at(*rows_scale, y);
                rows->tile(x, y, xo, yo, xi, yi, 64, 64, TailStrategy::GuardWithIf)
                    .vectorize(xi, natural_vector_size<uint8_t>())
                    .parallel(yo);
            }
            if (cols) {
                // Column maxima row by row, in vector lanes across columns.
                cols_scale->split(x, xo, xi, 256, TailStrategy::GuardWithIf).parallel(xo);
                col_amax_axis.compute_at(*cols_scale, xo).vectorize(x, 8, TailStrategy::GuardWithIf);
                col_amax_axis.update().reorder(x, down).vectorize(x, 8, TailStrategy::GuardWithIf);
                cols->tile(y, x, yo, xo, yi, xi, 64, 64, TailStrategy::GuardWithIf).parallel(xo);
                cols_q.compute_at(*cols, yo).vectorize(x, natural_vector_size<uint8_t>(), TailStrategy::GuardWithIf);
            }
        } else if (sched.value() == "cuda_general") {
            if (rows) {
                // A GPU block per row: 256 threads stride along it, one thread their maxima.
                rows_scale->gpu_blocks(y);
                row_amax_axis.compute_at(*rows_scale, y);
                Func per_lane = row_amax_axis.update().split(rk_axis, ro, ri, 256, TailStrategy::GuardWithIf).rfactor(ri, t);
                per_lane.compute_at(*rows_scale, y).gpu_threads(t);
                per_lane.update().gpu_threads(t);
                // M / 8 blocks on the grid's x: y stops at 65,535.
                rows->gpu_tile(x, y, xo, yo, xi, yi, 128, 8, TailStrategy::GuardWithIf).reorder(xi, yi, yo, xo);
            }
            if (cols) {
                // A thread per column, down the rows (or the strips' maxima), coalesced across threads.
                cols_scale->gpu_tile(x, y, xo, yo, xi, yi, 128, 1, TailStrategy::GuardWithIf);
                col_amax_axis.compute_at(*cols_scale, xi);
                schedule_cols_staged(32);
            }
        } else {
            throw std::invalid_argument("recipe axis has cpu and cuda_general schedules only (axis_pass first: cpu, cuda_strips)");
        }
    }

    // Axiswise pass 1: a strip of strip_rows rows at a time computes its row maxima and
    // scales, then writes rows, the row scales and the strip's column maxima in loops fused
    // at the strip (compute_with), so the strip is read from memory once and re-read from cache.
    void schedule_axis_first() {
        Var t("t");
        RVar ro("ro"), ri("ri");
        const int R = strip_rows;
        const TailStrategy guard = TailStrategy::GuardWithIf;
        if (sched.value() == "cpu") {
            // A strip per task: bf16 2048^2 10.8 ms, 1000x4096 10.2 ms against 12.2 and 11.6 for
            // the one-pipeline variant (2 shared EPYC cores; both bound by the integer encoder).
            const int vec = natural_vector_size<uint8_t>();
            rows->split(y, yo, yi, R, guard).split(x, xo, xi, vec, guard).reorder(xi, xo, yi, yo).vectorize(xi).parallel(yo);
            rows_scale->split(y, yo, yi, R, guard).parallel(yo).compute_with(*rows, yo);
            col_partials_out->split(x, xo, xi, vec, guard).reorder(xi, xo, yo).vectorize(xi).parallel(yo).compute_with(*rows, yo);
            row_scale_axis.compute_at(*rows, yo);
            // Row maxima in vector lanes along the row, then across the lanes.
            const int lanes = natural_vector_size<uint32_t>();
            row_amax_axis.compute_at(row_scale_axis, y);
            Func per_lane = row_amax_axis.update().split(rk_axis, ro, ri, lanes, guard).rfactor(ri, t);
            per_lane.compute_at(row_scale_axis, y).vectorize(t);
            per_lane.update().vectorize(t);
            // The strip's column maxima row by row, in vector lanes across columns.
            strip_col_amax.compute_at(*col_partials_out, xo).vectorize(x, vec, guard);
            strip_col_amax.update().reorder(x, rs_axis).vectorize(x, vec, guard);
        } else if (sched.value() == "cuda_strips") {
            // A GPU block per strip, 256 threads across K; rows and the column maxima walk the
            // strip in the same 256-column chunks (fused at xo), so the maxima re-read each
            // chunk from L1. Launch limits at any M and K: a one-dimensional grid of
            // ceil(M / R) blocks, 256 threads, (R * 256 + R) * 4 bytes of shared memory.
            const int T = 256;
            if (R < 1 || (R * T + R) * 4 > 48 * 1024) {
                throw std::invalid_argument("cuda_strips: strip_rows " + std::to_string(R) +
                                            " needs more than the 48 KiB of shared memory a block gets");
            }
            rows->split(y, yo, yi, R, guard).split(x, xo, xt, T, guard).reorder(xt, yi, xo, yo).gpu_blocks(yo).gpu_threads(xt);
            rows_scale->split(y, yo, yi, R, guard).reorder(x, yi, yo).gpu_blocks(yo).gpu_threads(yi).compute_with(*rows, yo);
            col_partials_out->split(x, xo, xt, T, guard).reorder(xt, xo, yo).gpu_blocks(yo).gpu_threads(xt).compute_with(*rows, xo);
            strip_col_amax.compute_at(*col_partials_out, xt);
            // Row maxima: each thread reduces its columns of every row of the strip (coalesced
            // across threads) into shared memory, then a thread per row folds the 256 lanes.
            // Row threads split by R: mapped on y itself, Halide bounds their count by every
            // strip's rows, M threads per block (refused by cuLaunchKernel above 1024).
            Var ys("ys"), yr("yr");
            row_scale_axis.compute_at(*rows, yo)
                .store_in(MemoryType::GPUShared)
                .split(y, ys, yr, R, guard)
                .gpu_threads(yr);
            row_amax_axis.compute_at(row_scale_axis, yr);
            Func per_lane = row_amax_axis.update().split(rk_axis, ro, ri, T, guard).rfactor(ri, t);
            per_lane.compute_at(*rows, yo).store_in(MemoryType::GPUShared).reorder(t, y).gpu_threads(t);
            per_lane.update().reorder(t, y).gpu_threads(t);
            // Constant shared memory (a strip's): otherwise Halide sizes it by a host loop over
            // every strip per call (it cannot prove the fused stages' extents equal).
            row_scale_axis.bound_storage(y, R);
            per_lane.bound_storage(y, R).bound_storage(t, T);
        } else {
            throw std::invalid_argument("axis_pass first has cpu and cuda_strips schedules only");
        }
    }

    // torchao's amax_to_scale from amax bits (schedx::torchao_scale_bits).
    Expr axis_scale_bits(Expr amax) { return schedx::torchao_scale_bits(amax, fp8_format_is_e5m2(), pow2_scales != 0); }

    // fp8 of fp32(v * scale), torchao's order (NaN scale: NaN codes; scale 0: x * 0).
    Expr axis_quantize(Expr v, Expr scale, Expr is_e5m2) {
        Expr sb = reinterpret<uint32_t>(scale);
        return select(sb > u32(0x7F800000), cast<uint8_t>(0x7F), schedx::encode_fp8(scaled(v, sb), is_e5m2));
    }

    // The block's scale from its amax bits: fp32 scale bits (block recipes) or the E8M0
    // byte (mx).
    Expr scale_bits_of(Expr amax) {
        if (recipe == Recipe::mx) return mx_scale_byte(amax);
        // TE's compute_scale_from_amax, in fp64 from exact operands (see the header).
        Expr eps = cast<uint32_t>(epsilon_bits);
        Expr a = select(amax < eps, eps, amax);
        Expr fp8_max = select(fp8_format_is_e5m2(), Expr(57344.0), Expr(448.0));
        Expr q = float_bits_of_double(strict_float(fp8_max / double_of_normal(a)));
        // A subnormal amax leaves fp8_max / amax above FLT_MAX (its quotient is >= 2^134).
        Expr vfi = u32(max_finite_bits(in_type));
        Expr s = select(a == 0 || a >= u32(0x7F800000), u32(0x3F800000),
                        a < u32(0x00800000) || q >= u32(0x7F800000), vfi, q);
        return select(pow2_scales != 0, s & u32(0xFF800000), s);
    }

    Expr fp8_format_is_e5m2() {
        return fp8.value() == "any" ? (fp8_format != 0) : Expr(fp8.value() == "e5m2");
    }

    // OCP MX v1.0 E8M0 scale of a 32-element block from its amax bits (NaN, inf -> 255).
    Expr mx_scale_byte(Expr amax) {
        Expr e5 = fp8_format_is_e5m2();
        Expr biased = cast<int>(amax >> 23);  // 0 for zero and subnormal amax
        // FLOOR (torchao to_mx): exponent(amax) - emax_elem, clamped at the E8M0 minimum.
        Expr floor_byte = max(biased - select(e5, 15, 8), 0);
        // RCEIL (torchao _to_mx_rceil, TE): descale = fp32(amax * fp32(1 / fp8_max)), then
        // the E8M0 value at or above it; the product is formed exactly in integers and
        // rounded as fp32 rounds (a subnormal descale included, which the GPU would flush).
        const uint32_t c4 = bits_of(1.0f / 448.0f), c5 = bits_of(1.0f / 57344.0f);
        Expr c = select(e5, u32(c5), u32(c4));
        Expr amant = (amax & u32(0x7FFFFF)) | select(biased > 0, u32(0x800000), u32(0));
        Expr cmant = (c & u32(0x7FFFFF)) | u32(0x800000);
        Expr e2 = (max(biased, 1) - 150) + (cast<int>(c >> 23) - 150);
        Expr d = float_bits_of(cast<uint64_t>(amant) * cast<uint64_t>(cmant), e2);
        Expr dexp = cast<int>(d >> 23), dmant = d & u32(0x7FFFFF);
        Expr up = select(dexp == 0, dmant > u32(0x400000), dmant != u32(0));
        Expr rceil_byte = dexp + select(up, 1, 0);
        Expr byte = select(mx_rceil != 0, select(amax == u32(0x7F800000), 254, rceil_byte), floor_byte);
        return cast<uint32_t>(select(amax > u32(0x7F800000), 255, byte));
    }

    // What the encoder rounds to fp8 for v in a block of this scale: fp32(v * scale).
    Expr scaled_in_block(Expr v, Expr scale) {
        if (recipe != Recipe::mx) return scaled(v, scale);
        // E8M0 byte b multiplies by 2^(127 - b), as torchao applies it (header): FLOOR b = 0 by
        // 2^126, b = 255 (NaN amax) by 0 (x / inf: finite x a signed zero, inf and NaN NaN);
        // RCEIL b = 0 by 1, b = 254 (inf amax) by 2^-127 (subnormal: two normal factors, exact
        // for every x whose code is not 0), b = 255 NaN. Both encoders give signed zeros
        // sign | 0 and NaN 0x7F.
        Expr rceil = mx_rceil != 0;
        Expr field = select(scale == u32(0), select(rceil, u32(127), u32(253)), u32(254) - min(scale, u32(253)));
        Expr product = select(rceil && scale == u32(254), scaled(scaled(v, u32(63) << 23), u32(64) << 23),
                              scaled(v, field << 23));
        Expr u = reinterpret<uint32_t>(v);
        Expr finite = (u & u32(0x7FFFFFFF)) < u32(0x7F800000);
        Expr nan_block = reinterpret<float>(select(finite && !rceil, u & u32(0x80000000), u32(0x7FC00000)));
        return select(scale == u32(255), nan_block, product);
    }

    // An E8M0 byte as two fp32 factors, (x * f1) * f2 on CUDA (one IEEE mul.f32 each, no ftz)
    // equal to scaled_in_block's operand for every x: FLOOR byte 255 0 (x * 0: a finite x a
    // signed zero, inf and NaN NaN), RCEIL byte 255 NaN, RCEIL byte 254 2^-64 then 2^-63,
    // else 2^(127 - byte) (FLOOR byte 0 2^126, RCEIL byte 0 1) then 1. Once per block, where
    // scaled_in_block's selects ran per element (14 instructions per code, ptxas sm_90).
    Tuple mx_factors(Expr byte) {
        Expr rceil = mx_rceil != 0;
        Expr field = select(byte == u32(0), select(rceil, u32(127), u32(253)), u32(254) - min(byte, u32(253)));
        Expr f1 = select(byte == u32(255), select(rceil, u32(0x7FC00000), u32(0)), rceil && byte == u32(254), u32(63) << 23,
                         field << 23);
        Expr f2 = select(rceil && byte == u32(254), u32(64) << 23, u32(0x3F800000));
        return Tuple(reinterpret<float>(f1), reinterpret<float>(f2));
    }

    // Off CUDA a subnormal v is rebuilt 2^64 larger first, as scaled() does: the factors are
    // powers of two, 0 or NaN, so the products are exact but where they are far below fp8's
    // range (zero codes either way), with or without a flushing CPU mode.
    Expr by_factors(Expr v, FuncRef factors) {
        Expr f1 = factors[0], f2 = factors[1];
        if (get_target().has_feature(Target::CUDA)) return strict_float(strict_float(v * f1) * f2);
        Expr u = reinterpret<uint32_t>(v);
        Expr a = u & u32(0x7FFFFFFF);
        Expr lifted = reinterpret<float>(reinterpret<uint32_t>(cast<float>(a) * 0x1p-85f) | (u & u32(0x80000000)));
        return strict_float(select(a < u32(0x00800000), ((lifted * f1) * f2) * 0x1p-64f, (v * f1) * f2));
    }

    // The fp8 code at (x, y) of `operand`'s values. encoder=ptx: cvt pairs of elements
    // adjacent along an output row (x for rows, y for cols: pair_along_x), two codes per
    // `pairs` entry, low byte first; the schedule computes `pairs` per thread in registers.
    Expr encoded(Func operand, Func pairs, bool pair_along_x, Expr is_e5m2) {
        if (encoder.value() != "ptx") return schedx::encode_fp8(operand(x, y), is_e5m2);
        // Subnormal products need no care: cvt rounds them to the signed zero the integer
        // encoder gives (the cast's _cvt variants, every bf16 and fp16 pattern on the H200).
        auto at = [&](int j) { return pair_along_x ? operand(2 * x + j, y) : operand(x, 2 * y + j); };
        pairs(x, y) = schedx::ptx_cvt_fp8x2(at(0), at(1), fp8.value() == "e5m2");
        Expr pair = pair_along_x ? pairs(x / 2, y) : pairs(x, y / 2);
        Expr high = (pair_along_x ? x : y) % 2 == 1;
        return cast<uint8_t>(select(high, pair >> 8, pair));
    }

    // The word of codes 4w..4w+3 along an output row (rows: w along x; cols: along y), the
    // lowest in the low byte; encoder=ptx merges two cvt pairs (ptxas folds the merge into
    // the second F2FP where bytes took 4-5 instructions a pair).
    Expr code_word(Func codes, Func pairs, bool along_x) {
        Var w = along_x ? x : y;
        auto at = [&](Func f, Expr i) { return along_x ? f(i, y) : f(x, i); };
        if (encoder.value() == "ptx") return cast<uint32_t>(at(pairs, 2 * w)) | (cast<uint32_t>(at(pairs, 2 * w + 1)) << 16);
        Expr word = u32(0);
        for (int j = 0; j < 4; j++) word = word | (cast<uint32_t>(at(codes, 4 * w + j)) << (8 * j));
        return word;
    }

    // fp32(v * s) as IEEE rounds it, s normal and positive (bits). On CUDA one mul.f32: the
    // PTX has no .ftz (above), so subnormal v and products stay. Elsewhere a subnormal v (which
    // a flushing CPU mode would zero) is rebuilt exactly 2^64 larger from its integer
    // mantissa, scaled, and brought back; where that result is itself subnormal it encodes as
    // fp8 zero either way.
    Expr scaled(Expr v, Expr s_bits) {
        Expr s = reinterpret<float>(s_bits);
        if (get_target().has_feature(Target::CUDA)) return strict_float(v * s);
        Expr u = reinterpret<uint32_t>(v);
        Expr a = u & u32(0x7FFFFFFF);
        Expr lifted = reinterpret<float>(reinterpret<uint32_t>(cast<float>(a) * 0x1p-85f) | (u & u32(0x80000000)));
        return strict_float(select(a < u32(0x00800000), (lifted * s) * 0x1p-64f, v * s));
    }

    // 1 / scale correctly rounded (fp64 quotient rounded by integer code: a scale_inv may be
    // subnormal, e.g. 1 / FLT_MAX), or 0 in the padding.
    Expr scale_inv_or_zero(Expr in_range, Expr scale) {
        Expr inv = float_bits_of_double(strict_float(Expr(1.0) / double_of_normal(scale)));
        return reinterpret<float>(select(in_range, inv, u32(0)));
    }

    // CPU (the fallback without a GPU, and what CI tests): each instance of the block
    // scales at root (rows of blocks in parallel), the outputs in 64 x 64 tiles.
    void schedule_cpu() {
        const int vec = natural_vector_size<uint8_t>();
        for (BlockScales *b : {&rows_scale_for_q, &cols_scale_for_q, &rows_scale_for_array, &cols_scale_for_array}) {
            if (!b->scale.defined()) continue;
            Var outer = b->scale.args()[1], inner = b->scale.args()[0];
            b->scale.compute_root().parallel(outer);
            b->amax.compute_at(b->scale, inner);
        }
        if (rows) {
            rows->tile(x, y, xo, yo, xi, yi, 64, 64, TailStrategy::GuardWithIf)
                .vectorize(xi, vec)
                .parallel(yo);
        }
        if (cols) {
            cols->tile(y, x, yo, xo, yi, xi, 64, 64, TailStrategy::GuardWithIf).parallel(xo);
            cols_q.compute_at(*cols, yo).vectorize(x, vec, TailStrategy::GuardWithIf);
        }
        for (Output<Buffer<>> *o : {rows_scale, cols_scale}) {
            if (o) o->vectorize(o->args()[0], 8, TailStrategy::GuardWithIf).parallel(o->args()[1]);
        }
    }

    // CPU tiles of tile_rows x tile elements (whole blocks), rows of tiles in parallel: each
    // tile reduces its block maxima in vector lanes (16-bit inputs in 16 bits), computes each
    // scale once for its codes and its scale-array entries (fused at the tile, compute_with),
    // writes rows from registers and cols from the tile's cols codes (a gather per vector on
    // AVX-512, 16 x 16 blocks on AVX2, as the cast's CPU tiles). A ragged edge runs guarded.
    // bf16 2048^2, one thread: 1x128 15.1 ms, 128x128 11.3 against 85.9 and 83.8 for
    // schedule_cpu (build machine, noisy, alternated; docs/quantize_fp8.md).
    void schedule_cpu_tiled() {
        const int TK = tile, TM = tile_rows, B = recipe == Recipe::mx ? 32 : 128;
        const TailStrategy guard = TailStrategy::GuardWithIf;
        // Vectors no wider than a block along K, so that each holds one rows scale.
        const int vec = std::min(natural_vector_size<uint8_t>(), B);
        // Buffers from 0 (the runtime binds them so): a vector's block index is then provably
        // one value, a broadcast scale (unknown mins made it a gather of 64 scales).
        for (int d = 0; d < 2; d++) {
            input->dim(d).set_min(0);
            rows->dim(d).set_min(0);
            cols->dim(d).set_min(0);
        }
        rows->tile(x, y, xo, yo, xi, yi, TK, TM, guard).vectorize(xi, vec).parallel(yo);
        cols->tile(y, x, yo, xo, yi, xi, TM, TK, guard).reorder(yi, xi, xo, yo).parallel(yo).compute_with(*rows, xo);
        if (get_target().has_feature(Target::AVX512)) {
            cols->vectorize(yi, natural_vector_size<uint8_t>());
        } else {
            const int S = 16;
            Var ys("ys"), xs("xs");
            cols->tile(yi, xi, ys, xs, yi, xi, S, S).reorder(yi, xi, ys, xs).vectorize(yi).unroll(xi);
            cols_q.in(*cols).compute_at(*cols, ys).vectorize(x).unroll(y);
        }
        // A constant row pitch: cols' column reads take immediate offsets (a pitch in a register
        // cost a reload per byte).
        cols_q.compute_at(*rows, xo).vectorize(x, vec, guard).bound_storage(x, TK);
        // The scale arrays in the tiles' loops: along K (x) tile / B entries of a tile where the
        // array is blocked along K, else tile; along M (y) likewise.
        const bool square = recipe == Recipe::block2d;
        fuse_cpu_scale_array(rows_scale, TK / B, square ? TM / B : TM);
        fuse_cpu_scale_array(cols_scale, square ? TK / B : TK, TM / B);
        schedule_cpu_tile_scales(rows_scale_for_q);
        if (!square) schedule_cpu_tile_scales(cols_scale_for_q);  // block2d: one instance for both
    }

    // A scale array's entries of a CPU tile (per_k along K, per_m along M) in the tile's loops.
    void fuse_cpu_scale_array(Output<Buffer<>> *o, int per_k, int per_m) {
        Var a("a"), b("b");
        const bool k_first = o->args()[0].name() == x.name();
        const TailStrategy guard = TailStrategy::GuardWithIf;
        o->split(x, xo, a, per_k, guard).split(y, yo, b, per_m, guard);
        Var inner = k_first ? a : b, outer = k_first ? b : a;
        o->reorder(inner, outer, xo, yo).parallel(yo).compute_with(*rows, xo);
        // Each entry's 1 / scale is some 50 scalar operations (fp64 and integer rounding).
        if ((k_first ? per_k : per_m) >= 8) o->vectorize(inner, 8);
    }

    // One scale instance once per CPU tile, its maxima in vector lanes: down the columns for
    // cols' blocks, in lanes along a row reduced across them for rows' (and block2d's).
    void schedule_cpu_tile_scales(BlockScales &bs) {
        const TailStrategy guard = TailStrategy::GuardWithIf;
        const int B = recipe == Recipe::mx ? 32 : 128;
        const int lanes = natural_vector_size(in_type == ElemType::fp32 ? UInt(32) : UInt(16));
        const bool square = recipe == Recipe::block2d;
        bs.scale.compute_at(*rows, xo);
        if (bs.factors.defined()) {  // mx: the two factors of each block, beside its byte
            bs.factors.compute_at(*rows, xo).vectorize(bs.along_k ? y : x, 8, guard);
        }
        if (!bs.along_k && !square) {
            bs.scale.vectorize(x, lanes, guard);
            bs.amax.compute_at(bs.scale, by).vectorize(x, lanes, guard);
            bs.amax.update().reorder(x, bs.r.x).vectorize(x, lanes, guard);
            return;
        }
        // The tile's maxima first, then its scales from them, 8 rows a vector (1x128, MX).
        if (!square) bs.scale.vectorize(y, 8, guard);
        Var lane("lane");
        RVar ro("ro"), ri("ri");
        bs.amax.compute_at(*rows, xo);
        Func per_lane = bs.amax.update().split(bs.r.x, ro, ri, std::min(lanes, B)).rfactor(ri, lane);
        per_lane.compute_at(bs.amax, bx).vectorize(lane);
        per_lane.update().vectorize(lane);
    }

    // cols (x transposed) in tile_m x 32 tiles: the codes staged in shared memory, each
    // thread storing 4 consecutive bytes of a column. At tile_m = 128 the staging stage runs
    // on 32 x 8 threads, 4 groups each: 32 x 32 would make the block 128 x 32 = 4096 threads.
    void schedule_cols_staged(int tile_m) {
        Func tile_q = cols_q.in(*cols);
        cols->tile(y, x, yo, xo, yi, xi, tile_m, 32, TailStrategy::GuardWithIf)
            .split(xi, xt, xi, 4, TailStrategy::GuardWithIf)
            .reorder(xi, yi, xt, yo, xo)
            .unroll(xi)
            .gpu_blocks(yo, xo)
            .gpu_threads(yi, xt);
        tile_q.compute_at(*cols, yo)
            .store_in(MemoryType::GPUShared)
            .split(y, yt, y, 4, TailStrategy::GuardWithIf)
            .reorder(y, x, yt)
            .unroll(y);
        if (tile_m > 32) {
            Var ys("ys");
            tile_q.split(yt, ys, yt, 8, TailStrategy::GuardWithIf).reorder(y, ys, x, yt);
        }
        tile_q.gpu_threads(x, yt);
    }

    // General CUDA path for any shape and leading dimension (element I/O, a kernel per
    // output). Each kernel computes the block scales it needs inside its blocks: rows in
    // 128 x 32 tiles (a thread per row of a block reduces it from L1), cols in 32 x 32
    // tiles (128 x 32 for block2d) staged in shared memory, block2d's 128 x 128 maxima by
    // 128 threads (32 x 4) down its columns; the scale arrays a thread per entry (block2d: a
    // GPU block per entry). At most 1024 threads per block (rows 32 x 32, cols 32 x 8 or,
    // block2d, 128 x 8). Blocks overlapping several tiles are reduced once per tile. It
    // exists for correctness on shapes the tiled kernels cannot take.
    void schedule_cuda_general() {
        const bool square = recipe == Recipe::block2d;
        if (rows) {
            rows->tile(x, y, xo, yo, xi, yi, 128, 32, TailStrategy::GuardWithIf)
                .split(xi, xt, xi, 4, TailStrategy::GuardWithIf)
                .reorder(xi, xt, yi, xo, yo)
                .unroll(xi)
                .gpu_blocks(xo, yo)
                .gpu_threads(xt, yi);
            scales_in_block(rows_scale_for_q, *rows, xo);
        }
        if (cols) {
            schedule_cols_staged(square ? 128 : 32);
            scales_in_block(cols_scale_for_q, *cols, yo);
        }
        for (auto [o, b] : {std::pair{rows_scale, &rows_scale_for_array}, std::pair{cols_scale, &cols_scale_for_array}}) {
            if (!o) continue;
            Var d0 = o->args()[0], d1 = o->args()[1];
            if (square) {
                o->gpu_blocks(d0, d1);
                scales_in_block(*b, *o, d0);
            } else {
                o->gpu_tile(d0, d1, xo, yo, xi, yi, 128, 1, TailStrategy::GuardWithIf);
                // mx arrays ([M][KB], [K][MB]): their long dimension d1 on the grid's x.
                if (recipe == Recipe::mx) o->reorder(xi, yi, yo, xo);
                b->scale.compute_at(*o, xi);
                b->amax.compute_at(*o, xi);
            }
        }
    }

    // One 128 x 128 tile per GPU block, x read once: the tile is staged in shared memory
    // (16-bit inputs; rows padded by pad_elems against bank conflicts), each block scale of
    // both orientations is reduced from it (a thread per row block, a thread per column
    // block; block2d: block_max_lanes), and rows, cols and both scale arrays are written by
    // stages fused into the same blocks (compute_with). Codes are encoded once per output
    // (twice per element; block2d with cols_from_rows once), by the integer encoder or (ptx)
    // cvt pairs. Whole tiles only: M and K multiples of 128 (block2d: 512, so that the scale
    // arrays have no padding). H200: 1 x 128 101.6 us at 8192^2, 66% of a copy
    // (quantize_tiles_2026-12-05_h200_7943873.md); what lost: docs/quantize_fp8.md.
    void schedule_cuda_tiled() {
        if (in_type == ElemType::fp32) throw std::invalid_argument("cuda_tiled stages 16-bit inputs only");
        const int T = schedx::quantize_layout::kTile, B = recipe == Recipe::mx ? 32 : 128, R = rows_per_thread;
        const int W = vector_io ? schedx::quantize_layout::kVectorElems : 1;  // codes per element of rows and cols
        const bool square = recipe == Recipe::block2d;
        constrain_tiles(T, W, square);
        Expr K = input->dim(0).extent(), M = input->dim(1).extent();
        constrain_tiled_scales(T, B, K, M, square);
        Func first = row_sink ? Func(*row_sink) : rows ? Func(*rows) : Func(*cols);
        schedule_tiled_codes(T, W, R);
        schedule_tiled_scale_arrays(first, T, B);
        schedule_tile_staging(first, T, R);
        schedule_tiled_maxima(first, T, B, square);
    }

    // Whole tiles only (block2d: 4 x 4 of them); with vector_io, rows of whole 8-byte vectors.
    void constrain_tiles(int T, int W, bool square) {
        const int whole = schedx::quantize_layout::whole_tiles(square);
        Expr K = input->dim(0).extent(), M = input->dim(1).extent();
        input->dim(0).set_min(0).set_extent((K / whole) * whole);
        input->dim(1).set_min(0).set_extent((M / whole) * whole);
        K = input->dim(0).extent();
        M = input->dim(1).extent();
        if (rows) {
            rows->dim(0).set_min(0).set_extent(K / W);
            rows->dim(1).set_min(0).set_extent(M);
        }
        if (cols) {
            cols->dim(0).set_min(0).set_extent(M / W);
            cols->dim(1).set_min(0).set_extent(K);
        }
        if (vector_io) {
            input->set_host_alignment(2 * W);  // 16-bit elements
            input->dim(1).set_stride((input->dim(1).stride() / W) * W);
        }
    }

    void constrain_tiled_scales(int T, int B, Expr K, Expr M, bool square) {
        // Scale arrays (no padding at whole tiles): block1d [K/128][M], [M/128][K]; block2d
        // [M/128][K/128], [K/128][M/128]; mx [M][K/32], [K][M/32] (dim 0 first).
        Expr rs0 = recipe == Recipe::block1d ? M : K / B, rs1 = recipe == Recipe::block1d ? K / B : (square ? M / B : M);
        Expr cs0 = recipe == Recipe::block1d ? K : M / B, cs1 = recipe == Recipe::block1d ? M / B : (square ? K / B : K);
        if (recipe == Recipe::axis) {
            rs0 = 1, rs1 = M, cs0 = K, cs1 = 1;
        }
        if (rows) rows_scale->dim(0).set_min(0).set_extent(rs0).dim(1).set_min(0).set_extent(rs1);
        if (cols) cols_scale->dim(0).set_min(0).set_extent(cs0).dim(1).set_min(0).set_extent(cs1);
        if (row_sink) row_sink->dim(0).set_min(0).set_extent(M).dim(1).set_min(0).set_extent(K / T);
        if (col_sink) col_sink->dim(0).set_min(0).set_extent(K).dim(1).set_min(0).set_extent(M / T);
    }

    // Threads: 32 x (128 / R), each 4 elements of R rows (cols: of R columns), one word
    // of codes per row (column) with vector_io.
    void schedule_tiled_codes(int T, int W, int R) {
        if (rows) {
            rows->tile(x, y, xo, yo, xi, yi, T / W, T, TailStrategy::RoundUp)
                .split(xi, xt, xi, 4 / W, TailStrategy::RoundUp)
                .split(yi, yt, yi, R, TailStrategy::RoundUp)
                .reorder(xi, yi, xt, yt, xo, yo)
                .unroll(yi)
                .gpu_blocks(xo, yo)
                .gpu_threads(xt, yt);
            rows->unroll(xi);
        }
        if (cols) {
            cols->split(y, yo, yi, T / W, TailStrategy::RoundUp)
                .split(x, xo, xi, T, TailStrategy::RoundUp)
                .split(yi, yt, yi, 4 / W, TailStrategy::RoundUp)
                .split(xi, xt, xi, R, TailStrategy::RoundUp)
                .reorder(yi, xi, yt, xt, xo, yo)
                .unroll(xi)
                .gpu_blocks(xo, yo)
                .gpu_threads(yt, xt);
            cols->unroll(yi);
            if (rows) cols->compute_with(*rows, xo);
        }
        // encoder=ptx: a thread's two cvt pairs per row (rows) or column (cols) in registers,
        // each byte stored from them.
        if (rows && encoder.value() == "ptx" && !vector_io) rows_pairs.compute_at(*rows, yi).store_in(MemoryType::Register).unroll(x);
        if (cols && encoder.value() == "ptx" && !vector_io) cols_pairs.compute_at(*cols, xi).store_in(MemoryType::Register).unroll(y);
    }

    // A scale array's tile in the block of `first` (compute_with): the block loops renamed xo
    // (K tiles) and yo (M tiles) to fuse.
    void fuse_scale_array(Func first, Output<Buffer<>> *o, bool dim0_along_k, int per_tile0, int per_tile1) {
        Var a("a"), b("b");
        Var outer0 = dim0_along_k ? xo : yo, outer1 = dim0_along_k ? yo : xo;
        o->split(o->args()[0], outer0, a, per_tile0, TailStrategy::RoundUp)
            .split(o->args()[1], outer1, b, per_tile1, TailStrategy::RoundUp)
            .reorder(a, b, xo, yo)
            .gpu_blocks(xo, yo);
        // A thread per entry along the tile's longer side (as 32 x n threads), the
        // other side serial.
        Var lo("lo"), hi("hi");
        Var across = per_tile0 >= per_tile1 ? a : b, along = per_tile0 >= per_tile1 ? b : a;
        const int n = std::max(per_tile0, per_tile1);
        if (n > 32) {
            o->split(across, hi, lo, 32, TailStrategy::RoundUp).reorder(along, lo, hi, xo, yo).gpu_threads(lo, hi);
        } else {
            o->reorder(along, across, xo, yo).gpu_threads(across);
        }
        o->unroll(along);
        if (Func(*o).name() != first.name()) o->compute_with(first, xo);
    }

    void schedule_tiled_scale_arrays(Func first, int T, int B) {
        if (row_sink) {  // axiswise pass 1: the sinks as block1d's scale arrays
            fuse_scale_array(first, row_sink, false, T, 1);
            fuse_scale_array(first, col_sink, true, T, 1);
        } else if (recipe == Recipe::axis) {
            // Axiswise pass 2: the row scales by the first column of tiles, the column scales
            // by the first row (fused loops of unequal extents). In kernels of their own they
            // took 3 us each (H100), latency-bound.
            fuse_scale_array(first, rows_scale, true, 1, T);   // [M][1]: (x, m)
            fuse_scale_array(first, cols_scale, true, T, 1);   // [1][K]: (k, y)
        } else if (recipe == Recipe::block1d) {
            if (rows) fuse_scale_array(first, rows_scale, false, T, 1);  // (m, kb)
            if (cols) fuse_scale_array(first, cols_scale, true, T, 1);   // (k, mb)
        } else if (recipe == Recipe::mx) {
            if (rows) fuse_scale_array(first, rows_scale, true, T / B, T);   // (kb, m)
            if (cols) fuse_scale_array(first, cols_scale, false, T / B, T);  // (mb, k)
        } else {
            if (rows) fuse_scale_array(first, rows_scale, true, 1, 1);   // (kb, mb)
            if (cols) fuse_scale_array(first, cols_scale, false, 1, 1);  // (mb, kb)
        }
    }

    void schedule_tile_staging(Func first, int T, int R) {
        // The input tile, staged once: each thread loads 4 elements of R rows.
        xraw.compute_at(first, xo)
            .store_in(MemoryType::GPUShared)
            .split(x, xt, x, 4, TailStrategy::RoundUp)
            .split(y, yt, y, R, TailStrategy::RoundUp)
            .reorder(x, y, xt, yt)
            .unroll(y)
            .gpu_threads(xt, yt)
            // The fused stages clamp their tiles to their own ranges, which bounds inference
            // cannot prove 128 wide: unbounded, it required 2M - 128 rows of the input.
            .bound_extent(x, T)
            .bound_extent(y, T);
        if (pad_elems > 0) xraw.bound_storage(x, T + pad_elems);
        if (vector_io) xraw.vectorize(x);
        else xraw.unroll(x);
        if (cols_from_rows) {
            // rows' code words of the tile, on rows' threads (a word of 16 rows each); rows copies
            // them out and cols transposes them. Rows padded by a word: cols' column reads
            // (rows 4 apart across a warp) then conflict 4-way, not 32-way. H100: 99.7 us at 8192^2,
            // 92% of a copy, even with _patches (quantize_candidates_2026-12-06_h100_cd630ed.md).
            rows_words.compute_at(first, xo)
                .store_in(MemoryType::GPUShared)
                .split(y, yt, y, R, TailStrategy::RoundUp)
                .reorder(y, x, yt)
                .unroll(y)
                .gpu_threads(x, yt)
                .bound_extent(x, T / 4)
                .bound_extent(y, T)
                .bound_storage(x, T / 4 + 1);
        }
    }

    void schedule_tiled_maxima(Func first, int T, int B, bool square) {
        for (BlockScales *bs : {&rows_scale_for_q, &cols_scale_for_q}) {
            if (!bs->scale.defined()) continue;
            if (bs == &cols_scale_for_q && square && rows) continue;  // the same instance as rows'
            // The 128 reducing threads as 32 x 4, inside the 32 x (128 / R) grid of the
            // other stages (a 128-wide stage would make every block 128 threads wide).
            Var lo("lo"), hi("hi");
            // Axiswise pass 1 keeps the maxima (its sinks' atomics read them), not scales.
            Func kept = row_sink ? bs->amax.in() : bs->scale;
            kept.compute_at(first, xo).store_in(MemoryType::GPUShared);
            if (square && block_max_lanes == 256) {
                schedule_block_max_patches(*bs, first, kept);
            } else if (square) {
                Var t("t");
                bs->amax.compute_at(first, xo);
                Func per_lane = bs->amax.update().rfactor(bs->r.x, t);
                per_lane.compute_at(first, xo).split(t, hi, lo, 32).gpu_threads(lo, hi);
                per_lane.update().split(t, hi, lo, 32).gpu_threads(lo, hi);
            } else {
                Var across = bs->along_k ? y : x, along = bs->along_k ? bx : by;
                kept.split(across, hi, lo, 32, TailStrategy::RoundUp).reorder(along, lo, hi).gpu_threads(lo, hi);
                // Constant storage: the regions are one tile's, but Halide sized them by a host
                // loop over all tiles (it cannot prove the fused stages' extents equal).
                kept.bound_storage(across, T).bound_storage(along, T / B);
                bs->amax.compute_at(kept, along);
                if (bs->amax.has_update_definition()) {  // axiswise pass 2 reads its maxima
                    // 8 elements a step: wider shared loads and 8 loads in flight per thread.
                    // One thread per maximum: two per maximum (all 256 threads busy) was 1.13x slower.
                    RVar ro("ro"), ri("ri");
                    bs->amax.update().split(bs->r.x, ro, ri, 8).unroll(ri);
                }
                if (bs->factors.defined()) {  // mx: beside the bytes, from them
                    bs->factors.compute_at(first, xo).store_in(MemoryType::GPUShared);
                    bs->factors.split(across, hi, lo, 32, TailStrategy::RoundUp).reorder(along, lo, hi).gpu_threads(lo, hi);
                    bs->factors.bound_storage(across, T).bound_storage(along, T / B);
                }
            }
        }
    }

    // block2d's maximum with block_max_lanes = 256: an 8 x 8 patch per thread, 16 threads over 16
    // patches, the scale's thread over those 16: 8 + 16 + 16 dependent steps where 128 + 128 ran.
    // H100: 98.4 us at 8192^2 (93% of a copy) against 135.1 (quantize_candidates_2026-12-06_h100_cd630ed.md).
    void schedule_block_max_patches(BlockScales &bs, Func first, Func scale) {
        RVar rxo("rxo"), rxi("rxi"), ryo("ryo"), ryi("ryi");
        Var u("u"), v("v"), t("t"), lo("lo"), hi("hi");
        Func patch = bs.amax.update().split(bs.r.x, rxo, rxi, 8).split(bs.r.y, ryo, ryi, 8).rfactor({{rxo, u}, {ryo, v}});
        Func column = bs.amax.update().rfactor(ryo, v);
        // Each stage's maxima accumulate in registers; the wrappers hold them in shared memory.
        Func patches = patch.in(column), columns = column.in(bs.amax);
        patches.compute_at(first, xo)
            .store_in(MemoryType::GPUShared)
            .fuse(u, v, t)
            .split(t, hi, lo, 32)
            .gpu_threads(lo, hi);
        patch.compute_at(patches, lo);
        patch.update().unroll(rxi).unroll(ryi);
        columns.compute_at(first, xo).store_in(MemoryType::GPUShared).gpu_threads(v);
        column.compute_at(columns, v);
        column.update().unroll(rxo);
        // The scale's one thread as a thread loop, so that its fold stays in registers (at the
        // block level each unrolled step was a stage of its own, a barrier each).
        scale.gpu_threads(scale.args()[0]);
        bs.amax.compute_at(scale, scale.args()[0]);
        bs.amax.update().unroll(ryo);
    }

    // A consumer's block scales inside its GPU block (loop `at`), in shared memory.
    void scales_in_block(BlockScales &b, Func consumer, Var at) {
        b.scale.compute_at(consumer, at).store_in(MemoryType::GPUShared);
        if (recipe == Recipe::block2d) {
            // 128 threads (32 x 4) each reduce a column of the block; one thread their maxima.
            // 128 along x would widen the consumer's 32 x 32 block to 4096 threads.
            Var t("t"), lo("lo"), hi("hi");
            b.amax.compute_at(consumer, at);
            Func per_lane = b.amax.update().rfactor(b.r.x, t);
            per_lane.compute_at(consumer, at).split(t, hi, lo, 32).gpu_threads(lo, hi);
            per_lane.update().split(t, hi, lo, 32).gpu_threads(lo, hi);
        } else {
            // A thread per block of the tile (its serial reduction reads through L1).
            Var across = b.along_k ? y : x, along = b.along_k ? bx : by;
            b.scale.reorder(along, across).gpu_threads(across);
            b.amax.compute_at(b.scale, along);
        }
    }
};

}  // namespace

HALIDE_REGISTER_GENERATOR(QuantizeFp8, quantize_fp8)
