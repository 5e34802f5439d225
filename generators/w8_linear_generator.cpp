// Weight-only int8 linear (LLM inference):
//   y[m][n] = (sum_k x[m][k] * float(W[n][k])) * scales[n] (+ bias[n])
// x is bf16 or fp16 [M, K], W int8 [N, K], scales and bias bf16 or fp32 [N], y [M, N] in
// x's dtype, rounded to nearest-even once from the fp32 accumulator. K is the contiguous
// dimension of x and W (called k here), n the contiguous one of y. 16-bit formats travel
// as uint16 bits (Halide's bf16 crashes the CUDA backend, ../shared/HALIDE.md).
//
// `stage` splits the same algorithm around a cuBLAS GEMM for large M: `dequantize` writes
// W in x's dtype (exact: every int8 is a bf16 and an fp16), `epilogue` turns the GEMM's
// fp32 result into y with the scale and bias. `rescale` instead scales a y that the GEMM
// wrote in x's dtype, in place: two roundings, as PyTorch's own linear(...) * scales, for
// half the epilogue's traffic and no fp32 result.
//
// `planes` and `planes_epilogue` split it around cuBLAS's int8 GEMM (int32 accumulation,
// tensor cores) instead, which reads W once as int8 and never converts it: each row of x
// becomes an integer multiple q of a power of two 2^(e-148) chosen from the row's largest
// |x| (e its float exponent field, so |q| < 2^22), and q three signed int8 digits,
// q = d2 * 2^16 + d1 * 2^8 + d0: rows 3m, 3m + 1, 3m + 2 of one int8 matrix. The epilogue
// adds the planes' int32 products exactly (in fp64), scales by 2^(e-148) and rounds once
// to fp32, then applies scale and bias as the other kernels do. Exact for elements in the
// binade of the row's largest |x| or the 14 below it (bf16; 11 for fp16); smaller ones
// round to a multiple of 2^-21 of that binade, below an fp32 accumulator's own rounding.
// A row holding inf or NaN gives NaN in all its outputs.
#include <functional>

#include "Halide.h"
#include "numerics.h"
#include "ptx_extern.h"
#include "w8_linear_layout.h"

namespace {

using namespace Halide;
using schedx::ElemType;

enum class Stage { linear, dequantize, epilogue, rescale, planes, planes_epilogue };

constexpr schedx::w8::Layout kLayout{};

class W8Linear : public Generator<W8Linear> {
public:
    GeneratorParam<ElemType> x_type{"x_type", ElemType::bf16, schedx::elem_type_names()};      // bf16 | fp16
    GeneratorParam<ElemType> scale_type{"scale_type", ElemType::bf16, schedx::elem_type_names()};  // bf16 | fp32
    GeneratorParam<bool> with_bias{"with_bias", false};
    GeneratorParam<Stage> stage{"stage", Stage::linear,
                                {{"linear", Stage::linear},
                                 {"dequantize", Stage::dequantize},
                                 {"epilogue", Stage::epilogue},
                                 {"rescale", Stage::rescale},
                                 {"planes", Stage::planes},
                                 {"planes_epilogue", Stage::planes_epilogue}}};
    // cpu | cuda_general | cuda_gemv | cuda_smallbatch | cuda_splitk | cuda_mma (stage=linear);
    // cuda_words (stage=dequantize, rescale); cuda_general (stage=epilogue, planes_epilogue);
    // cuda_row_blocks (stage=planes)
    GeneratorParam<std::string> sched{"schedule", "cpu"};
    // Defaults of the layout's parameters: schedx::w8::Layout's (w8_linear_layout.h), which the runtime reads.
    GeneratorParam<int> rows_per_warp{"rows_per_warp", kLayout.rows_per_warp};
    GeneratorParam<int> load_words{"load_words", kLayout.load_words};
    GeneratorParam<int> warps{"warps", 4};  // warps per block
    GeneratorParam<int> batch{"batch", kLayout.batch};
    GeneratorParam<int> split_k{"split_k", kLayout.split_k};
    // cuda_gemv / cuda_smallbatch: a lane's load_words W words per step as
    // load_words / vector_words vectors 32 vectors apart, so that each warp-wide load reads
    // 32 contiguous vectors (false: one contiguous run per lane, 4 * load_words bytes apart).
    // stage=dequantize: a lane's two 16-byte stores 512 bytes apart, so that each warp-wide
    // store writes 512 contiguous bytes (false: one 32-byte run per lane).
    GeneratorParam<bool> coalesced{"coalesced", false};
    // Lane layouts: W's loads carry an evict-first L2 policy (the runtime's PTX rewrite,
    // generators/ptx_extern.h) instead of running under the runtime's L2 streaming window.
    // H200, dirty L2: ties the window at M = 1 (23.35 against 23.39 us at 8192^2), M = 4 1.1% faster.
    GeneratorParam<bool> evict_first{"evict_first", false};
    // Lane layouts: W's vector width in words (4: 16-byte loads; 2 and 1 for rows of W only
    // 8- or 4-byte aligned, K = 4100 say). x's vectors are twice as wide, at most 16 bytes.
    GeneratorParam<int> vector_words{"vector_words", kLayout.vector_words};
    // cuda_gemv / cuda_smallbatch: K in whole vectors (4 * vector_words elements) instead of
    // whole steps; the part past the last whole step is one more, guarded, update.
    // cuda_mma: K in whole chunks (16 * load_words) instead of split_k chunks; the warps of
    // the last round whose chunk is past K add zeros.
    GeneratorParam<bool> k_tail{"k_tail", kLayout.k_tail};
    // cuda_gemv / cuda_smallbatch with k_tail: x and W as elements, for any K, row pitch and
    // pointer alignment (K = 11009, say): lane l takes elements 32 j + l of a step, so each
    // warp-wide load reads 32 contiguous elements.
    GeneratorParam<bool> element_io{"element_io", false};
    // The algorithm of `schedule` with its buffer constraints but Halide's default schedule:
    // tests build the lane layout for the CPU (tests/test_w8_lanes_cpu.cpp). No variant sets it.
    GeneratorParam<bool> default_schedule{"default_schedule", false};

    void configure() {
        if (x_type == ElemType::fp32) throw std::invalid_argument("x_type must be bf16 or fp16");
        if (scale_type == ElemType::fp16) throw std::invalid_argument("scale_type must be bf16 or fp32");
        const std::string s = sched;
        lane_layout = s == "cuda_gemv" || s == "cuda_smallbatch" || s == "cuda_splitk";
        mma_layout = s == "cuda_mma";
        word_io = (lane_layout && !element_io) || mma_layout || s == "cuda_words";
        if (element_io && (!k_tail || coalesced || evict_first || vector_words != 4 || s == "cuda_splitk")) {
            throw std::invalid_argument("element_io takes cuda_gemv or cuda_smallbatch with k_tail, and neither coalesced, "
                                        "evict_first nor vector_words");
        }
        if (mma_layout && (rows_per_warp % 16 != 0 || batch % 8 != 0 || (load_words % 2 != 0 && load_words != 1))) {
            throw std::invalid_argument("cuda_mma takes rows_per_warp a multiple of 16, batch of 8, load_words 1 or of 2");
        }
        // Split-K interleaves single groups among its warps: a lane's run is one group there.
        if (evict_first && !lane_layout) throw std::invalid_argument("evict_first takes a lane layout (cuda_gemv, cuda_smallbatch, cuda_splitk)");
        if (coalesced && stage != Stage::dequantize &&
            (!lane_layout || s == "cuda_splitk" || int(load_words) % int(vector_words) != 0)) {
            throw std::invalid_argument("coalesced takes stage=dequantize, or schedule=cuda_gemv or cuda_smallbatch and "
                                        "load_words a multiple of vector_words");
        }
        if (vector_words != 4 && vector_words != 2 && vector_words != 1) throw std::invalid_argument("vector_words is 1, 2 or 4");
        if (vector_words != 4 && s != "cuda_gemv" && s != "cuda_smallbatch") {
            throw std::invalid_argument("vector_words takes schedule=cuda_gemv or cuda_smallbatch");
        }
        if (k_tail && s != "cuda_gemv" && s != "cuda_smallbatch" && s != "cuda_mma") {
            throw std::invalid_argument("k_tail takes schedule=cuda_gemv, cuda_smallbatch or cuda_mma");
        }
        const Type half_t = word_io ? UInt(32) : UInt(16);
        const Type scale_t = scale_type == ElemType::fp32 ? Float(32) : UInt(16);
        switch (stage) {
        case Stage::linear:
            x = add_input<Buffer<>>("x", half_t, 2);
            w = add_input<Buffer<>>("w", word_io ? UInt(32) : Int(8), 2);
            scales = add_input<Buffer<>>("scales", scale_t, 1);
            if (with_bias) bias = add_input<Buffer<>>("bias", scale_t, 1);
            y = add_output<Buffer<>>("y", UInt(16), 2);
            break;
        case Stage::dequantize:
            w = add_input<Buffer<>>("w", word_io ? UInt(32) : Int(8), 2);
            w_out = add_output<Buffer<>>("w_out", half_t, 2);
            break;
        case Stage::epilogue:
            acc_in = add_input<Buffer<>>("acc", Float(32), 2);
            scales = add_input<Buffer<>>("scales", scale_t, 1);
            if (with_bias) bias = add_input<Buffer<>>("bias", scale_t, 1);
            y = add_output<Buffer<>>("y", UInt(16), 2);
            break;
        case Stage::rescale:  // "acc" is y itself: the runtime binds both to one buffer
            acc_in = add_input<Buffer<>>("acc", half_t, 2);
            scales = add_input<Buffer<>>("scales", scale_t, 1);
            y = add_output<Buffer<>>("y", half_t, 2);
            break;
        case Stage::planes:  // [3M rows][K + 16]: row 3m + p is digit p of row m of x
            x = add_input<Buffer<>>("x", UInt(16), 2);
            planes_out = add_output<Buffer<>>("planes", Int(8), 2);
            break;
        case Stage::planes_epilogue:  // acc: the GEMM's [3M][N] int32, planes for the exponents
            acc_in = add_input<Buffer<>>("acc", Int(32), 2);
            planes_in = add_input<Buffer<>>("planes", Int(8), 2);
            scales = add_input<Buffer<>>("scales", scale_t, 1);
            if (with_bias) bias = add_input<Buffer<>>("bias", scale_t, 1);
            y = add_output<Buffer<>>("y", UInt(16), 2);
            break;
        }
    }

    void generate() {
        // THE ALGORITHM
        // Element bits from word-typed buffers: byte/half i of a word is element 4j+i / 2j+i.
        if (w) {
            // 2^23's bits for int8_of_word_to_float's PRMT, as a value the compiler cannot
            // fold (W's row pitch is at least K > 0): with a constant there, ptxas put the
            // byte selector in a register and re-loaded it before every PRMT. Left undefined
            // on the CPU and for the autoschedulers, which want an estimate for every
            // parameter (a stride has none) and cannot cost the intrinsic.
            Expr &magic = w_magic;
            if (get_target().has_feature(Target::CUDA) && !using_autoscheduler()) {
                magic = select(w->dim(1).stride() > 0, schedx::u32(0x4B000000), schedx::u32(0));
            }
            // Columns beyond N (a tile's padding) read column N-1 instead of out of bounds;
            // their results are never stored.
            Expr nc = clamp(n, 0, w->dim(1).extent() - 1);
            if (lane_layout && element_io) {
                w_rows(kv, l, c, n) = cast<uint32_t>(reinterpret<uint8_t>((*w)(element_k(kv, l, c), nc)));
                wf_lane(kv, l, c, n) = schedx::int8_of_word_to_float(w_rows(kv, l, c, n), 0, magic);
            } else if (lane_layout) {
                // Element kv of lane l's lane_run() in group c, k = (c*32 + l)*lane_run() + kv:
                // indexed by (kv, l, c), a lane's words of one step are a dense box.
                w_rows(kv, l, c, n) = (*w)((c * 32 + l) * (lane_run() / 4) + kv, nc);
                // The mark goes on the staged words' uses: inside w_rows' vectorized load
                // Halide would scalarize the extern call and the load with it.
                Expr w_word = w_rows(kv / 4, l, c, n);
                if (evict_first) w_word = schedx::ptx_evict_first(w_word);
                wf_lane(kv, l, c, n) = schedx::int8_of_word_to_float(w_word, kv % 4, magic);
            } else if (mma_layout) {
                // Word kv of lane l's run in K chunk c, for the A fragment's rows l / 4 (h = 0)
                // and l / 4 + 8 (h = 1) of 16-row tile nt (define_mma_sum).
                const int LW = load_words;
                Expr row = clamp(nt * 16 + l / 4 + 8 * h, 0, w->dim(1).extent() - 1);
                w_rows(kv, h, l, c, nt) = (*w)(mma_vector(c, l) * LW + kv, row);
                // Bytes i, i + 1 of a W word as two elements of x's dtype, byte i in the low half.
                w_pair = [this, magic](Expr word, int i) {
                    Expr lo = schedx::int8_of_word_to_float(word, i, magic);
                    Expr hi = schedx::int8_of_word_to_float(word, i + 1, magic);
                    if (x_type == ElemType::bf16) {  // the floats' upper halves, one PRMT
                        return schedx::prmt(reinterpret<uint32_t>(lo), reinterpret<uint32_t>(hi), schedx::u32(0x7632));
                    }
                    return schedx::small_int_to_half_bits(lo, x_type) | (schedx::small_int_to_half_bits(hi, x_type) << 16);
                };
            } else if (word_io) {
                w_rows(k, n) = (*w)(k, nc);  // k counts words here
                wf(k, n) = schedx::int8_of_word_to_float(w_rows(k / 4, n), k % 4, magic);
            } else if (!magic.defined()) {
                // The CPU converts int8 vectors by widening (vpmovsxbd, vcvtdq2ps: 2 instructions
                // a vector against the bit trick's 5 there); both exact.
                wf(k, n) = cast<float>((*w)(k, nc));
            } else {
                wf(k, n) = schedx::int8_of_word_to_float(cast<uint32_t>(reinterpret<uint8_t>((*w)(k, nc))), 0, magic);
            }
        }
        if (stage == Stage::planes) {
            // Byte K of each row (after the K digits) holds e; the rest of the 16 is zero.
            Expr kx = x->dim(0).extent();
            Expr mc = clamp(m, 0, x->dim(1).extent() - 1);
            xf(k, m) = schedx::decode_to_float(cast<uint32_t>((*x)(clamp(k, 0, kx - 1), mc)), x_type);
            // 32 x 16 x (16 per 8192 of K) elements, those past K repeating element K - 1:
            // whole strides for the 512 threads of schedule_planes, 16 loads each without a guard.
            row_rk = RDom({{0, 32}, {0, 16}, {0, ((kx + 8191) / 8192) * 16}}, "rk");
            row_max(m) = schedx::u32(0);
            row_max(m) = max(row_max(m), reinterpret<uint32_t>(xf(row_rk.x + 32 * row_rk.y + 512 * row_rk.z, m)) &
                                             schedx::u32(0x7FFFFFFF));
            row_exp(m) = max((row_max(m) >> 23) & schedx::u32(0xFF), schedx::u32(1));
            // 2^(148 - e) in fp64 (up to 2^147), so x * it is exact and below 2^22.
            Expr e = row_exp(m);
            Expr up = reinterpret<double>(cast<uint64_t>(1023 + 148 - cast<int32_t>(e)) << 52);
            row_q(k, m) = select(e == 255, 0, cast<int32_t>(round(cast<double>(xf(k, m)) * up)));
            // Plane row 3r + p holds digit p of row r's q (all three from one q).
            Expr r = m / 3, p = m % 3, q = row_q(k, r);
            Expr d0 = ((q + 128) & 255) - 128, q1 = (q - d0) >> 8;
            Expr d1 = ((q1 + 128) & 255) - 128, d2 = (q1 - d1) >> 8;
            Expr digit = select(p == 0, d0, p == 1, d1, d2);
            (*planes_out)(k, m) = cast<int8_t>(select(k < kx, digit, k == kx, cast<int32_t>(row_exp(r)), 0));
        } else if (stage == Stage::dequantize) {
            // Always word-typed (schedule=cuda_words): two outputs per word.
            (*w_out)(k, n) = schedx::small_int_to_half_bits(wf(2 * k, n), x_type) |
                             (schedx::small_int_to_half_bits(wf(2 * k + 1, n), x_type) << 16);
        } else if (stage == Stage::rescale) {
            // n counts words of two outputs here.
            auto scaled = [&](Expr bits, Expr col) {
                Expr s = scale_value((*scales)(clamp(col, 0, scales->dim(0).extent() - 1)));
                return schedx::float_to_half_bits(schedx::decode_to_float(bits, x_type) * s, x_type);
            };
            Expr word = (*acc_in)(n, m);
            (*y)(n, m) = scaled(word & schedx::u32(0xFFFF), 2 * n) | (scaled(word >> 16, 2 * n + 1) << 16);
        } else {
            if (stage == Stage::linear) {
                Expr mc = clamp(m, 0, x->dim(1).extent() - 1);  // as nc, for rows beyond M
                if (mma_layout) {  // x words kv of lane l's run in chunk c for B's column l / 4 of 8-row tile mt
                    const int LW = load_words;
                    Expr row = clamp(mt * 8 + l / 4, 0, x->dim(1).extent() - 1);
                    x_rows(kv, l, c, mt) = (*x)(mma_vector(c, l) * 2 * LW + kv, row);
                } else if (lane_layout && element_io) {
                    x_rows(kv, l, c, m) = cast<uint32_t>((*x)(element_k(kv, l, c), mc));
                    xf_lane(kv, l, c, m) = schedx::decode_to_float(x_rows(kv, l, c, m), x_type);
                } else if (lane_layout) {  // as w_rows: the x words that meet a lane's W words
                    x_rows(kv, l, c, m) = (*x)((c * 32 + l) * (lane_run() / 2) + kv, mc);
                    xf_lane(kv, l, c, m) = schedx::decode_to_float(
                        (x_rows(kv / 2, l, c, m) >> (cast<uint32_t>(kv % 2) * 16)) & schedx::u32(0xFFFF), x_type);
                } else {
                    xbits(k, m) = cast<uint32_t>((*x)(k, mc));
                }
                // Word schedules take K in whole steps (asserted by constrain_words);
                // saying so in the extent lets their splits of r be exact.
                Expr kk = w->dim(0).extent() * (word_io ? 4 : 1);
                if (k_step() > 1) kk = (kk / k_step()) * k_step();
                if (mma_layout) {
                    define_mma_sum(k_tail ? w->dim(0).extent() * 4 : kk);  // k_tail: whole chunks (constrain_words)
                } else if (lane_layout) {
                    // Each lane sums its own elements (over run and group: its index is
                    // a loop variable, not (k / run) % 32, whose bounds Halide would take as
                    // all 32 lanes), then five halvings add lane l + 16, 8, 4, 2, 1 to lane l
                    // (one shuffle each; lanes past the live half add lane 31, unused; lane
                    // 0 of the last holds the sum). Rotations ((l + s) % 32) cost two
                    // shuffles and a select, lanes fewer than 32 broke the striping; the
                    // rfactor'd form summed the 32 lanes one shuffle at a time, a third of
                    // the M = 8 kernel's instructions. Split-K gives part s of S the groups
                    // c = j * S + s (one warp each, the S parts then summed); elsewhere S = 1.
                    const int S = split_parts();
                    r = RDom({{0, lane_run()}, {0, kk / (32 * lane_run() * S)}}, "r");
                    lane_sum(l, s, n, m) = 0.0f;
                    lane_sum(l, s, n, m) += xf_lane(r.x, l, r.y * S + s, m) * wf_lane(r.x, l, r.y * S + s, n);
                    if (k_tail) define_tail_sum(kk);
                    Func level = lane_sum;
                    for (int shift = 16; shift >= 1; shift /= 2) {
                        Func sum("lanes_sum_" + std::to_string(32 / shift));
                        sum(l, s, n, m) = level(l, s, n, m) + level(min(l + shift, 31), s, n, m);
                        lane_tree.push_back(sum);
                        level = sum;
                    }
                    if (S == 1) {
                        acc(n, m) = level(0, 0, n, m);
                    } else {
                        part(s, n, m) = level(0, s, n, m);
                        RDom rs(0, S, "rs");
                        acc(n, m) = 0.0f;
                        acc(n, m) += part(rs, n, m);
                    }
                } else {
                    xf(k, m) = schedx::decode_to_float(xbits(k, m), x_type);
                    r = RDom(0, kk, "r");
                    acc(n, m) = 0.0f;
                    acc(n, m) += xf(r, m) * wf(r, n);
                }
            } else if (stage == Stage::planes_epilogue) {
                Expr kx = planes_in->dim(0).extent() - 16;
                Expr e = cast<int32_t>(reinterpret<uint8_t>((*planes_in)(kx, 3 * m)));
                auto digit_sum = [&](int p) { return cast<double>((*acc_in)(n, 3 * m + p)); };
                Expr q = digit_sum(2) * Expr(65536.0) + digit_sum(1) * Expr(256.0) + digit_sum(0);  // exact below 2^53
                Expr down = reinterpret<double>(cast<uint64_t>(1023 + e - 148) << 52);
                acc(n, m) = select(e == 255, reinterpret<float>(schedx::u32(0x7FC00000)), cast<float>(q * down));
            } else {
                acc(n, m) = (*acc_in)(n, m);
            }
            Expr nc = clamp(n, 0, scales->dim(0).extent() - 1);
            Expr out = acc(n, m) * scale_value((*scales)(nc));
            if (bias) out += scale_value((*bias)(nc));
            (*y)(n, m) = cast<uint16_t>(schedx::float_to_half_bits(out, x_type));
        }

        // ESTIMATES
        const int epw = word_io ? 2 : 1, wpw = word_io ? 4 : 1;
        if (x) x->set_estimates({{0, 8192 / epw}, {0, 16}});
        if (w) w->set_estimates({{0, 8192 / wpw}, {0, 8192}});
        if (w_out) w_out->set_estimates({{0, 8192 / epw}, {0, 8192}});
        if (acc_in) acc_in->set_estimates({{0, 8192}, {0, 1024}});
        if (scales) scales->set_estimates({{0, 8192}});
        if (bias) bias->set_estimates({{0, 8192}});
        if (y) y->set_estimates({{0, 8192}, {0, stage == Stage::epilogue ? 1024 : 16}});

        // THE SCHEDULE
        if (using_autoscheduler()) return;
        if (default_schedule) {
            if ((lane_layout && !element_io) || mma_layout) constrain_words();
            return;
        }
        const std::string s = sched;
        if (stage == Stage::planes || stage == Stage::planes_epilogue) {
            const std::string want = stage == Stage::planes ? "cuda_row_blocks" : "cuda_general";
            if (s != want) throw std::invalid_argument("this stage takes schedule=" + want);
            if (stage == Stage::planes) schedule_planes();
            else schedule_epilogue();
        } else if (stage == Stage::dequantize || stage == Stage::rescale) {
            if (s != "cuda_words") throw std::invalid_argument("stage=dequantize and rescale take schedule=cuda_words");
            if (stage == Stage::dequantize) schedule_dequantize();
            else schedule_rescale();
        } else if (stage == Stage::epilogue) {
            if (s != "cuda_general") throw std::invalid_argument("stage=epilogue takes schedule=cuda_general");
            schedule_epilogue();
        } else if (s == "cpu") {
            schedule_cpu();
        } else if (s == "cuda_general") {
            schedule_cuda_general();
        } else if (s == "cuda_gemv" || s == "cuda_smallbatch") {
            schedule_cuda_warp_rows();
        } else if (s == "cuda_splitk") {
            schedule_cuda_splitk();
        } else if (s == "cuda_mma") {
            schedule_cuda_mma();
        } else {
            throw std::invalid_argument("unknown schedule " + s);
        }
    }

private:
    Var kv{"kv"}, l{"l"}, c{"c"};  // lane layout: element (or word) in a lane's run, lane, group
    Var h{"h"}, e{"e"}, nt{"nt"}, mt{"mt"};  // mma layout: A's row half, D's float, 16-row tile of n, 8-row tile of m
    Var k{"k"}, n{"n"}, m{"m"}, no{"no"}, ni{"ni"}, nw{"nw"}, nl{"nl"}, mo{"mo"}, mi{"mi"}, u{"u"}, v{"v"}, s{"s"};
    bool word_io = false, lane_layout = false;  // lane_layout: cuda_gemv, cuda_smallbatch, cuda_splitk
    bool mma_layout = false;                    // cuda_mma
    Input<Buffer<>> *x = nullptr, *w = nullptr, *scales = nullptr, *bias = nullptr, *acc_in = nullptr;
    Output<Buffer<>> *y = nullptr, *w_out = nullptr, *planes_out = nullptr;
    Input<Buffer<>> *planes_in = nullptr;
    // planes: max |x| bits, exponent field and integer q of each row
    Func row_max{"row_max"}, row_exp{"row_exp"}, row_q{"row_q"};
    RDom row_rk;
    Func xbits{"xbits"}, xf{"xf"}, wf{"wf"}, acc{"acc"};
    // Word schedules stage these per lane: rows already clamped, so a tile of R columns or
    // B rows is a constant-size register array even at the edges (a guarded row count
    // put the staging arrays in local memory).
    Func w_rows{"w_rows"}, x_rows{"x_rows"};
    Func wf_lane{"wf_lane"}, xf_lane{"xf_lane"};  // the lane layout's wf and xf
    Func lane_sum{"lane_sum"};                     // a lane's partial sum of each output (and part)
    Func part{"part"};                             // split-K: each part's sum of each output
    std::vector<Func> lane_tree;                   // the five shuffle-and-add halvings across lanes
    Func mma_frag{"mma_frag"};                     // cuda_mma: a lane's four D floats of each tile (+ define_mma_sum's fifth)
    Func mma_out{"mma_out"};                       // ... indexed by float e
    std::function<Expr(Expr, int)> w_pair;         // cuda_mma: two int8 of a W word as an A fragment word
    Expr w_magic;                                  // int8_of_word_to_float's magic (undefined off CUDA)
    RDom r, rt;                                    // rt: k_tail's vectors past the whole steps

    // Lane layout: elements of one lane's contiguous run in a group of 32 runs. Coalesced,
    // one vector (a lane's load_words are load_words / vector_words runs, 128 * vector_words
    // bytes apart); else all 4 * load_words of a step in one run.
    int lane_run() const { return coalesced ? 4 * vector_words : 4 * load_words; }

    // element_io: element kv of lane l's run in group c, the runs' elements interleaved
    // lane by lane (a warp's load j of a step reads elements 32 j .. 32 j + 31).
    Expr element_k(Expr kv, Expr l, Expr c) const { return (c * lane_run() + kv) * 32 + l; }

    // k_tail: K from kk (the whole steps) on, in vectors of 4 * vector_words elements, lane l
    // taking vectors l, l + 32, ...; a lane past the last vector re-reads it (every load in
    // bounds, no branch in the warp) and adds 0.
    // element_io: vectors of one element, loaded as elements.
    void define_tail_sum(Expr kk) {
        const int VE = element_io ? 1 : 4 * vector_words;
        Expr kx = w->dim(0).extent() * (element_io ? 1 : 4);
        Expr vectors = (kx - kk) / VE;
        rt = RDom({{0, VE}, {0, (vectors + 31) / 32}}, "rt");
        Expr vec = rt.y * 32 + l;
        Expr kel = min(kk + vec * VE, kx - VE) + rt.x;
        Expr mc = clamp(m, 0, x->dim(1).extent() - 1), nc = clamp(n, 0, w->dim(1).extent() - 1);
        Expr xbits16, w_word, byte;
        if (element_io) {
            xbits16 = (*x)(kel, mc);
            w_word = cast<uint32_t>(reinterpret<uint8_t>((*w)(kel, nc)));
            byte = 0;
        } else {
            xbits16 = ((*x)(kel / 2, mc) >> (cast<uint32_t>(kel % 2) * 16)) & schedx::u32(0xFFFF);
            w_word = (*w)(kel / 4, nc);
            byte = kel % 4;
        }
        Expr product = schedx::decode_to_float(xbits16, x_type) * schedx::int8_of_word_to_float(w_word, byte, w_magic);
        lane_sum(l, s, n, m) += select(vec < vectors, product, 0.0f);
    }

    // Parts of K summed by separate warps: split_k for cuda_splitk and cuda_mma, else 1.
    int split_parts() const {
        const std::string s = sched;
        return s == "cuda_splitk" || s == "cuda_mma" ? int(split_k) : 1;
    }

    // The buffers' word layout (w8_linear_layout.h), which the runtime reads too.
    schedx::w8::Layout layout() const {
        return {lane_layout, mma_layout, split_parts(), load_words, vector_words, k_tail, rows_per_warp, batch};
    }

    // K elements per step of the word schedules' reduction (1: any K).
    int k_step() const { return stage != Stage::linear || !(word_io || element_io) ? 1 : layout().k_step(); }
    int k_granule() const { return layout().k_granule(); }  // not for element_io (any K)

    Expr scale_value(Expr e) {
        return scale_type == ElemType::fp32 ? e : schedx::decode_to_float(e, ElemType::bf16);
    }

    // Word-typed buffers start at 0 with rows a vector apart (16 bytes, or W's
    // vector_words and x's twice that), so that Halide can prove the vectors aligned (the
    // 128-bit access rule); K is whole granules (k_granule).
    void constrain_words() {
        const int xa = x_vector_words(), wa = layout().w_vector_words();
        x->dim(0).set_min(0).set_extent((x->dim(0).extent() / (k_granule() / 2)) * (k_granule() / 2));
        x->dim(1).set_min(0).set_stride((x->dim(1).stride() / xa) * xa);
        w->dim(0).set_min(0).set_extent(x->dim(0).extent() / 2);
        w->dim(1).set_min(0).set_stride((w->dim(1).stride() / wa) * wa);
        // Halide's PTX backend takes 4-word loads as 16-byte ones from the index alone; any
        // other vector is aligned only as far as the buffer says (else 4-byte loads).
        if (wa < 4) {
            x->set_host_alignment(4 * xa);
            w->set_host_alignment(4 * wa);
        }
    }

    int x_vector_words() const { return layout().x_vector_words(); }
    // cuda_mma with k_tail and W vectors under 16 bytes (K = 4100 at load_words 1): each
    // lane's vector of the last chunk live or zero.
    bool vector_tail() const { return layout().vector_tail(); }

    // cuda_mma: the index of lane l's vector (load_words W words, 2 load_words x words) in K
    // chunk c; with vector_tail clamped to the last whole vector, so loads stay in the row.
    Expr mma_vector(Expr c, Expr l) {
        Expr v = c * 4 + l % 4;
        return vector_tail() ? min(v, w->dim(0).extent() / int(load_words) - 1) : v;
    }

    // CPU: each output is one dot product of two contiguous rows, vectorized along K with
    // the partial sums in vector lanes (rfactor). A register tile of R = rows_per_warp rows of
    // W and B = batch rows of x keeps its R x B vectors of sums in registers through all of K,
    // so each converted W vector serves B outputs and each x vector R; tiles of 4 R rows of W
    // run in parallel. Rows beyond M or N read clamped copies and are never stored. Build
    // machine (2 shared Zen 4 cores, one thread, noisy), N = K = 4096: M = 1, R = 8: 700 us
    // (AVX-512) / 790 us (AVX2) against R = 1's 1250 and aten's 1150; M = 16, B = R = 4 (AVX-512):
    // 6.7 ms against aten's 8.0. R x B vectors of sums past the target's registers spill.
    void schedule_cpu() {
        const int vec = natural_vector_size<float>(), R = rows_per_warp, B = batch;
        RVar ro("ro"), ri("ri");
        Func intm = acc.update().split(r, ro, ri, vec, TailStrategy::GuardWithIf).rfactor(ri, v);
        y->split(n, nt, n, 4 * R, TailStrategy::GuardWithIf)
            .split(n, no, ni, R, TailStrategy::GuardWithIf)
            .split(m, mo, mi, B, TailStrategy::GuardWithIf)
            .reorder(ni, mi, mo, no, nt)
            .parallel(nt);
        intm.compute_at(*y, mo)
            .bound_extent(n, R)
            .bound_extent(m, B)
            .reorder_storage(v, n, m)
            .vectorize(v)
            .unroll(n)
            .unroll(m);
        intm.update().reorder(v, m, n, ro).vectorize(v).unroll(n).unroll(m);
        // B > 1: x as floats once per call (M x K, rows in parallel), read by every tile: M = 16,
        // B = R = 4, 5.5-6.0 against 6.9-7.5 ms decoding bf16 in each tile (build machine). At
        // B = 1 the decode is shared by R rows already.
        if (B > 1) xf.compute_root().parallel(m).vectorize(k, vec, TailStrategy::GuardWithIf);
    }

    // Any shape, leading dimension and alignment: one warp per output, its 32 lanes
    // striding over K with element loads and guarded tails, the partials summed by warp
    // shuffles. The reference the tuned schedules are checked against. H200, N = K = 8192:
    // M = 1 56.6 us, M = 16 615 us (2.6x / 3.8x the best tuned variant): one output per warp
    // re-reads x for every output and loads 2-byte elements.
    void schedule_cuda_general() {
        RVar ro("ro"), rl("rl");
        y->split(n, no, nw, 8, TailStrategy::GuardWithIf)
            .split(nw, nw, nl, 1)
            .reorder(nl, nw, no, m)
            .gpu_blocks(no, m)
            .gpu_threads(nl, nw);
        Func intm = acc.update().split(r, ro, rl, 32, TailStrategy::GuardWithIf).rfactor(rl, u);
        // One output per warp even in a guarded tail (reads are clamped), so the partials
        // stay in registers instead of a device allocation per call.
        intm.compute_at(*y, nw).bound_extent(n, 1).bound_extent(m, 1).gpu_lanes(u);
        intm.update().gpu_lanes(u);
    }

    // cuda_gemv (batch = 1) and cuda_smallbatch (batch = B): a warp owns rows_per_warp columns n
    // of y and `batch` rows m; each lane loads load_words W words per column in 16-byte accesses
    // and the matching x words once, keeps one sum per output in registers (int8 to float by one
    // PRMT and one add), and the lanes meet in five shuffle halvings. H200, N = K = 8192: M = 1
    // gemv_r2w8_coalesced 19.3 us, 82% of a copy (w8_l2_window_2026-12-03_h200_bfb14d0.md); the
    // register caps, tile widths and what lost: docs/w8_linear.md.
    void schedule_cuda_warp_rows() {
        const int R = rows_per_warp, B = batch, WB = warps;
        if (!element_io) constrain_words();
        y->split(n, no, ni, R * WB, TailStrategy::GuardWithIf)
            .split(ni, nw, ni, R, TailStrategy::GuardWithIf)
            .split(m, mo, mi, B, TailStrategy::GuardWithIf)
            .split(nw, nw, nl, 1)
            .reorder(mi, ni, nl, nw, no, mo)
            .unroll(mi)
            .unroll(ni)
            .gpu_blocks(no, mo)
            .gpu_threads(nl, nw);
        schedule_lanes(*y, nw, R, B);
    }

    // A warp's lane layout, computed at `at`'s loop `warp`: each lane's R x B sums as
    // registers (the tile is whole even at the edges of y: the reads are clamped), then the
    // halvings. Per step a lane takes `groups` runs of lane_run() elements: load_words /
    // vector_words runs 32 runs apart (coalesced) or one, with its R x load_words W words and B x
    // 2 * load_words x words loaded once as vectors.
    void schedule_lanes(Func at, Var warp, int R, int B) {
        const int groups = coalesced ? int(load_words) / int(vector_words) : 1;
        auto per_lane = [&](Func f) {  // Func is a handle: scheduling the copy schedules f
            f.compute_at(at, warp).bound_extent(l, 32).bound_extent(n, R).bound_extent(m, B).unroll(n).unroll(m);
            f.gpu_lanes(l);
        };
        per_lane(lane_sum);
        RVar ro("ro"), rj("rj");
        lane_sum.update()
            .split(r.y, ro, rj, groups)
            .reorder(m, n, r.x, rj, ro, l)  // the R*B independent chains interleave
            .unroll(m)
            .unroll(n)
            .unroll(r.x)
            .unroll(rj)
            .gpu_lanes(l);
        if (k_tail && element_io) {
            lane_sum.update(1).reorder(m, n, rt.x, rt.y, l).unroll(m).unroll(n).unroll(rt.x).gpu_lanes(l);
        } else if (k_tail) {
            // One W word (4 elements) per iteration: the whole vector unrolled took
            // b8_r8w4_coalesced_ktail from 4264 to 6936 SASS instructions.
            RVar wo("wo"), wi("wi");
            lane_sum.update(1).split(rt.x, wo, wi, 4).reorder(m, n, wi, wo, rt.y, l).unroll(m).unroll(n).unroll(wi).gpu_lanes(l);
        }
        for (Func &sum : lane_tree) per_lane(sum);
        if (element_io) {
            stage_lane_words(w_rows, ro, lane_run(), 1, n, R, 1);
            stage_lane_words(x_rows, ro, lane_run(), 1, m, B, 1);
        } else {
            stage_lane_words(w_rows, ro, lane_run() / 4, groups, n, R, vector_words);
            stage_lane_words(x_rows, ro, lane_run() / 2, groups, m, B, x_vector_words());
        }
    }

    // A lane's tile of `rows` (w_rows or x_rows: words of its runs x groups x rows) per step
    // `ro` of lane_sum, as a register array: constant extents, vectors of up to `vector`
    // words (at most 4: an 8-word vector became 8 scalar loads, the 128-bit access rule).
    void stage_lane_words(Func rows, RVar ro, int words, int groups, Var row, int count, int vector) {
        Var kw("kw");
        rows.compute_at(lane_sum, ro)
            .store_in(MemoryType::Register)
            .bound_extent(kv, words)
            .bound_extent(l, 1)
            .bound_extent(c, groups)
            .bound_extent(row, count)
            .unroll(c)
            .unroll(row);
        if (vector > 1) rows.split(kv, kv, kw, std::min(words, vector)).vectorize(kw);
        rows.unroll(kv);
    }

    // cuda_mma: y^T = W x^T on tensor cores, 16 rows of W (A, row-major) by 8 rows of x (B's
    // columns) per mma.sync m16n8k16, K 16 at a time. Lane l = 4g + t holds A's rows g and
    // g + 8, B's column g and k slots 2t, 2t + 1 (a0, a1, b0) and 2t + 8, 2t + 9 (a2, a3, b1)
    // (PTX ISA, m16n8k16 .bf16/.f16 fragments; docs/w8_linear.md lists the mapping). A sum
    // does not depend on which k sits in which slot if A and B agree, so the mma of word kv
    // of chunk c gives lane t's four slots k = 16 LW c + 4 (LW t + kv) + 0..3: a lane's A
    // words are whole W words (bytes 0, 1 -> a0 / a1, bytes 2, 3 -> a2 / a3) and its B words
    // whole x words, loaded as 16-byte vectors, where the PTX order would take 16-bit pieces.
    void define_mma_sum(Expr kk) {
        const int LW = load_words, S = split_parts();
        // Split-K: part s of S takes the chunks c = j * S + s (a warp each, summed in y).
        // k_tail: rounds up to the last chunk; a warp past it loads that chunk and multiplies
        // zeros (both operands: 0 * inf would be NaN).
        Expr chunks = vector_tail() ? (kk + 16 * LW - 1) / (16 * LW) : kk / (16 * LW);
        r = RDom({{0, LW}, {0, k_tail ? (chunks + S - 1) / S : chunks / S}}, "r");
        Expr c = r.y * S + s, valid = c < chunks;
        if (vector_tail()) valid = c * 4 + l % 4 < kk / (4 * LW);  // this lane's vector in K
        if (k_tail) c = min(c, chunks - 1);
        auto live = [&](Expr word) { return k_tail ? select(valid, word, schedx::u32(0)) : word; };
        Expr upper = w_rows(r.x, 0, l, c, nt), lower = w_rows(r.x, 1, l, c, nt);
        const std::vector<Expr> a = {live(w_pair(upper, 0)), live(w_pair(lower, 0)), live(w_pair(upper, 2)),
                                     live(w_pair(lower, 2))};
        const std::vector<Expr> b = {live(x_rows(2 * r.x, l, c, mt)), live(x_rows(2 * r.x + 1, l, c, mt))};
        // A fifth float, never read, sums the old four outside any call: Halide 21's tuple
        // split orders an update's stores by its values' reads of the tuple outside call
        // arguments only, and with the reads inside the extern calls alone it stored each new
        // float before the next call read the old one (four mma with mixed accumulators).
        mma_frag(l, s, nt, mt) = Tuple(0.0f, 0.0f, 0.0f, 0.0f, 0.0f);
        Tuple old = Tuple(mma_frag(l, s, nt, mt));
        std::vector<Expr> sum =
            schedx::ptx_mma_m16n8k16(a, b, {old[0], old[1], old[2], old[3]}, x_type == ElemType::fp16);
        sum.push_back(old[0] + old[1] + old[2] + old[3]);
        mma_frag(l, s, nt, mt) = Tuple(sum);
        // D's float e of lane l is row l / 4 + 8 (e / 2), column 2 (l % 4) + e % 2 of its tile.
        // As a dimension, not a Tuple element, so that y's unrolled loops pick it by index:
        // a mux over the Tuple left Halide's warp-shuffle pass loads of a dropped variable.
        mma_out(e, l, s, nt, mt) = mux(e, {old[0], old[1], old[2], old[3]});
        // In these forms Halide's simplifier proves each index y's loops give it to be this
        // lane's (((n % 16) + 8) % 8 it did not, and shuffled the floats between lanes).
        auto out_of = [&](Expr part) {
            return mma_out(m % 2 + 2 * ((n / 8) % 2), (n % 8) * 4 + (m / 2) % 4, part, n / 16, m / 8);
        };
        if (S == 1) {
            acc(n, m) = out_of(0);
        } else {  // the parts meet in shared memory
            RDom rs(0, S, "rs");
            acc(n, m) = 0.0f;
            acc(n, m) += out_of(rs);
        }
    }

    // cuda_mma: a warp owns rows_per_warp / 16 tiles of 16 columns n and batch / 8 tiles of 8
    // rows m; per K chunk each lane loads load_words W words of each of its two rows per tile
    // (a 16-byte vector at 4) and 2 load_words x words per row tile, converts the int8 to
    // pairs in registers, and issues load_words mmas per pair of tiles, the accumulators
    // staying in registers; then each lane stores the outputs its D floats hold. Rows beyond
    // N and M compute clamped copies that are never stored. H200, N = K = 8192: 55 us at
    // M <= 8 with 4 warps along n walking all of K (1.2 TB/s: too few loads in flight);
    // split_k > 1 gives each block split_k warps along K instead, their D floats summed
    // through shared memory (w8_mma_2026-12-05_h200_b0d036e.md).
    void schedule_cuda_mma() {
        const int NT = rows_per_warp / 16, MT = batch / 8, S = split_parts(), WB = warps, LW = load_words;
        if (S > 1 && WB != 1) throw std::invalid_argument("cuda_mma with split_k > 1 takes warps = 1");
        constrain_words();
        // From 0, so that Halide sees which lane and float hold each output (n % 16, m % 8).
        y->dim(0).set_min(0);
        y->dim(1).set_min(0);
        Var nh("nh"), ng("ng"), mq("mq"), ml("ml"), ntl("ntl"), mtl("mtl"), lane("lane"), kw("kw");
        // Output (n, m) of a warp sits in lane 4 ng + mq, float 2 nh + ml of tiles (ntl, mtl).
        y->split(n, no, ni, 16 * NT * WB, TailStrategy::GuardWithIf)
            .split(ni, nw, ni, 16 * NT)
            .split(ni, ntl, ni, 16)
            .split(ni, nh, ng, 8)
            .split(m, mo, mi, 8 * MT, TailStrategy::GuardWithIf)
            .split(mi, mtl, mi, 8)
            .split(mi, mq, ml, 2)
            .fuse(mq, ng, lane)
            .reorder(ml, nh, mtl, ntl, lane, nw, no, mo)
            .unroll(ml)
            .unroll(nh)
            .unroll(mtl)
            .unroll(ntl)
            .gpu_blocks(no, mo)
            .gpu_threads(lane, nw);
        mma_out.bound_extent(e, 4)
            .bound_extent(l, 32)
            .bound_extent(s, S)
            .bound_extent(nt, NT)
            .bound_extent(mt, MT)
            .reorder(e, nt, mt, l, s)
            .unroll(e)
            .unroll(nt)
            .unroll(mt);
        mma_frag.bound_extent(l, 32).bound_extent(nt, NT).bound_extent(mt, MT).unroll(nt).unroll(mt).gpu_lanes(l);
        // W vectors under 16 bytes: 4 / load_words chunks a step, unrolled, so that a lane has
        // the 16-byte forms' count of loads in flight before its mmas (8 or 16 chunks at
        // load_words 1 were no faster: w8_mma_ktail_vectors_2026-12-05_h100_cf8c10e.md).
        RVar ry = r.y;
        mma_frag.update().reorder(mt, nt, r.x, r.y, l, s);
        if (LW < 4) {
            ry = RVar("ryi");
            mma_frag.update().split(r.y, RVar("ryo"), ry, 4 / LW).unroll(ry);
        }
        mma_frag.update().unroll(mt).unroll(nt).unroll(r.x).gpu_lanes(l);
        if (S == 1) {
            // Each warp's D floats stay in its lanes' registers.
            mma_out.compute_at(*y, nw).gpu_lanes(l);
            mma_frag.compute_at(*y, nw);
        } else {
            // Warp s of a block computes part s into shared memory; y adds the parts.
            mma_out.compute_at(*y, no).store_in(MemoryType::GPUShared).gpu_threads(l, s);
            mma_frag.compute_at(mma_out, s);
            acc.compute_at(*y, ml).update().unroll(acc.rvars()[0]);
        }
        w_rows.compute_at(mma_frag, ry)
            .store_in(MemoryType::Register)
            .bound_extent(kv, LW)
            .bound_extent(h, 2)
            .bound_extent(l, 1)
            .bound_extent(c, 1)
            .bound_extent(nt, NT)
            .split(kv, kv, kw, std::min(LW, 4))
            .vectorize(kw)
            .unroll(kv)
            .unroll(h)
            .unroll(nt);
        x_rows.compute_at(mma_frag, ry)
            .store_in(MemoryType::Register)
            .bound_extent(kv, 2 * LW)
            .bound_extent(l, 1)
            .bound_extent(c, 1)
            .bound_extent(mt, MT)
            .split(kv, kv, kw, std::min(2 * LW, 4))
            .vectorize(kw)
            .unroll(kv)
            .unroll(mt);
    }

    // Small N: with a warp per few columns, N = 1024 fills only a fraction of the GPU and
    // each warp walks its whole row. Here a block owns rows_per_warp columns and split_k
    // warps share their K range, each in the GEMV's lane layout over every split_k-th
    // group; the parts meet in shared memory and one thread per column adds them.
    // H200, M = 1, (N, K) = (1024, 14336): splitk4_r2w4 8.30 us against 11.60 for the best
    // GEMV (explore_w8_splitk_2026-12-03_h200_140082f.md). S = 4 is the widest split whose
    // step (2048) divides K = 14336.
    void schedule_cuda_splitk() {
        const int R = rows_per_warp, S = split_k;
        constrain_words();
        y->split(n, no, ni, R, TailStrategy::GuardWithIf).reorder(ni, no, m).gpu_blocks(no, m).gpu_threads(ni);
        Var sl("sl");
        part.compute_at(*y, no)
            .store_in(MemoryType::GPUShared)
            .bound_extent(s, S)
            .bound_extent(n, R)
            .split(s, s, sl, 1)
            .reorder(n, sl, s)
            .unroll(n)
            .gpu_threads(sl, s);
        schedule_lanes(part, s, R, 1);
    }

    // Dequantize for the cuBLAS path: 16-byte loads of W (16 int8) to two 16-byte stores of
    // x's dtype per thread, the exact int8 values encoded by shift, cheaper than the rounding
    // bf16 encoder (H200 times at the coalesced form below, gpu_checks_2026-12-04_h200_34a0b15.md).
    void schedule_dequantize() {
        w->dim(0).set_min(0).set_extent((w->dim(0).extent() / 4) * 4);
        w->dim(1).set_min(0).set_stride((w->dim(1).stride() / 4) * 4);
        w_out->dim(0).set_min(0).set_extent(w->dim(0).extent() * 2);
        w_out->dim(1).set_min(0).set_stride((w_out->dim(1).stride() / 4) * 4);
        // can_run gives W 16-byte aligned and the workspace is 256-byte aligned; unsaid,
        // Halide assumes 4 bytes and splits each 32-byte store into eight 4-byte ones.
        w->set_host_alignment(16);
        w_out->set_host_alignment(16);
        Var ko("ko"), ki("ki"), kj("kj"), kt("kt"), nb("nb");
        if (coalesced) {
            // Per warp 256 output words (1 KB): two halves of 512 bytes, lane l writing words
            // 4l..4l+3 of each (from two 8-byte loads of W); two warps along K, four rows.
            // Why: the default form's 32-byte runs per lane leave each warp-wide store half of
            // 1 KB; Triton's kernel stores whole 512-byte runs. H200, 14336 x 4096 after an L2
            // flush: 44.7 us against 47.5 for the default form and 44.0 for Triton's
            // (bench/results/gpu_checks_2026-12-04_h200_34a0b15.md), so it is listed first.
            Var kq("kq"), kl("kl"), kw("kw");
            w_out->split(k, kq, ki, 4, TailStrategy::RoundUp)
                .split(kq, ko, kq, 128, TailStrategy::GuardWithIf)
                .split(kq, kw, kq, 64)
                .split(kq, kj, kl, 32)
                .split(n, nb, ni, 4, TailStrategy::GuardWithIf)
                .reorder(ki, kj, kl, kw, ni, ko, nb)
                .vectorize(ki)
                .unroll(kj)
                .gpu_blocks(ko, nb)
                .gpu_threads(kl, kw, ni);
            w_rows.compute_at(*w_out, kj).vectorize(k);
            return;
        }
        w_out->split(k, kt, ki, 8, TailStrategy::RoundUp)
            .split(ki, kj, ki, 4)
            .split(kt, ko, kt, 64, TailStrategy::GuardWithIf)
            .split(n, nb, ni, 4, TailStrategy::GuardWithIf)
            .reorder(ki, kj, kt, ni, ko, nb)
            .vectorize(ki)
            .unroll(kj)
            .gpu_blocks(ko, nb)
            .gpu_threads(kt, ni);
        w_rows.compute_at(*w_out, kt).vectorize(k);
    }

    // Epilogue of the cuBLAS path: elementwise over the fp32 GEMM result.
    void schedule_epilogue() {
        y->gpu_tile(n, m, no, mo, ni, mi, 128, 2, TailStrategy::GuardWithIf);
    }

    // Blocks of (1024 columns, row of x), 512 threads: each block finds its row's max |x|
    // (16 loads in flight per thread at K = 8192; the row's other blocks read it from L2),
    // then each thread turns two columns into q and writes the three digit planes of each.
    // H200 under ncu, M = 16, K = 8192: 6.4 us (the whole path with the pinned cuBLASLt
    // GEMM, dirty L2: 39.6 us at N = 8192). With one block per plane row (3M blocks, 16
    // digits per thread) it took 12.7 us: too few blocks to hide the loads' latency
    // (bench/results/w8_planes_lt_2026-12-03_h200_812cc62.md).
    void schedule_planes() {
        Var l("l"), g("g"), r("r"), p("p"), kc("kc"), t("t");
        RVar zo("zo"), zi("zi");
        planes_out->dim(1).set_min(0).set_extent((planes_out->dim(1).extent() / 3) * 3);
        // Threads as 32 x 16 in every stage (fused stages share one block shape).
        planes_out->split(m, r, p, 3, TailStrategy::RoundUp)
            .split(k, kc, ni, 1024, TailStrategy::GuardWithIf)
            .split(ni, u, t, 512)
            .split(t, g, l, 32)
            .reorder(p, u, l, g, kc, r)
            .unroll(p)
            .unroll(u)
            .gpu_blocks(kc, r)
            .gpu_threads(l, g);
        row_q.compute_at(*planes_out, u);
        row_max.compute_at(*planes_out, kc);
        Func part = row_max.update().rfactor({{row_rk.x, l}, {row_rk.y, g}});
        part.compute_at(*planes_out, kc).gpu_threads(l, g);
        // The K loop inside each thread's loop: outside it, Halide put a block barrier after
        // every load (7.2 us under ncu at M = 16, K = 8192, against 6.4 without them).
        part.update()
            .split(row_rk.z, zo, zi, 16, TailStrategy::GuardWithIf)
            .reorder(zi, zo, l, g)
            .unroll(zi)
            .gpu_threads(l, g);
        Func groups = row_max.update().rfactor(row_rk.y, g);
        groups.compute_at(*planes_out, kc).gpu_threads(g);
        groups.update().gpu_threads(g);
    }

    // In-place rescale: 16-byte loads and stores (8 outputs), two rows per thread so that
    // two loads are in flight. The runtime takes this path only for rows of whole 16-byte
    // vectors at 16-byte aligned starts. H200, N = K = 8192, M = 4096: 38 us under ncu
    // (134 MB moved) against 114 us for the fp32 epilogue; the whole path 780 us against
    // 859 (M = 1024: 239 against 257). Two rows per thread instead of one (torch.profiler,
    // back to back): 54.5 against 57.6 us at M x N = 4096 x 14336, 32.4 against 35.1 at
    // 4096 x 8192, 13.7 against 16.3 at 1024 x 14336 (torch.compile's Triton multiply:
    // 53.9, 31.1 and 20.9); four rows gained nothing more; rows in reverse order (to meet
    // the GEMM's last writes in L2) nothing (bench/results/w8_large_m_helpers_2026-12-03_h200.md).
    void schedule_rescale() {
        auto whole_vectors = [](auto &b) {
            b.dim(0).set_min(0).set_extent((b.dim(0).extent() / 4) * 4);
            b.dim(1).set_min(0).set_stride((b.dim(1).stride() / 4) * 4);
            b.set_host_alignment(16);
        };
        whole_vectors(*acc_in);
        whole_vectors(*y);
        Var nv("nv"), mr("mr"), mt("mt");
        y->split(n, n, nv, 4, TailStrategy::RoundUp)
            .vectorize(nv)
            .tile(n, m, no, mo, ni, mi, 64, 8, TailStrategy::GuardWithIf)
            .split(mi, mt, mr, 2)
            .reorder(nv, mr, ni, mt, no, mo)
            .unroll(mr)
            .gpu_blocks(no, mo)
            .gpu_threads(ni, mt);
    }
};

}  // namespace

HALIDE_REGISTER_GENERATOR(W8Linear, w8_linear)
