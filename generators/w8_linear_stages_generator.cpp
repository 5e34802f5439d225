// The stages of w8_linear's cuBLAS paths for large M (w8_linear_algorithm.h has the
// operator), one generator each:
//
// w8_dequantize writes W in x's dtype for cuBLAS's GEMM (exact: every int8 is a bf16 and an
// fp16); w8_epilogue turns the GEMM's fp32 result into y with the scale and bias;
// w8_rescale instead scales a y that the GEMM wrote in x's dtype, in place: two roundings,
// as PyTorch's own linear(...) * scales, for half the epilogue's traffic and no fp32 result.
//
// w8_planes and w8_planes_epilogue go around cuBLAS's int8 GEMM (int32 accumulation, tensor
// cores) instead, which reads W once as int8 and never converts it: each row of x becomes an
// integer multiple q of a power of two 2^(e-148) chosen from the row's largest |x| (e its
// float exponent field, so |q| < 2^22), and q three signed int8 digits,
// q = d2 * 2^16 + d1 * 2^8 + d0: rows 3m, 3m + 1, 3m + 2 of one int8 matrix. The epilogue
// adds the planes' int32 products exactly (in fp64), scales by 2^(e-148) and rounds once
// to fp32, then applies scale and bias as the other kernels do. Exact for elements in the
// binade of the row's largest |x| or the 14 below it (bf16; 11 for fp16); smaller ones
// round to a multiple of 2^-21 of that binade, below an fp32 accumulator's own rounding.
// A row holding inf or NaN gives NaN in all its outputs.
#include "w8_linear_algorithm.h"

namespace {

using namespace schedx::w8;
using schedx::ElemType;

enum class Words { cuda_words };
enum class General { cuda_general };
enum class RowBlocks { cuda_row_blocks };

class W8Dequantize : public Generator<W8Dequantize>, public Algorithm {
public:
    GeneratorParam<ElemType> x_type{"x_type", ElemType::bf16, schedx::elem_type_names()};  // bf16 | fp16
    GeneratorParam<Words> sched{"schedule", Words::cuda_words, {{"cuda_words", Words::cuda_words}}};
    // A lane's two 16-byte stores 512 bytes apart, so that each warp-wide store writes 512
    // contiguous bytes (false: one 32-byte run per lane).
    GeneratorParam<bool> coalesced{"coalesced", false};

    void configure() {
        set_types(x_type, ElemType::bf16);
        w = add_input<Buffer<>>("w", UInt(32), 2);
        w_out = add_output<Buffer<>>("w_out", UInt(32), 2);
    }

    void generate() {
        // THE ALGORITHM
        // Element bits from word-typed buffers: byte i of a word is element 4j+i; two
        // outputs per word.
        define_magic(get_target(), using_autoscheduler());
        w_rows(k, n) = (*w)(k, w_column());  // k counts words here
        wf(k, n) = schedx::int8_of_word_to_float(w_rows(k / 4, n), k % 4, w_magic);
        (*w_out)(k, n) = schedx::small_int_to_half_bits(wf(2 * k, n), x_elem) |
                         (schedx::small_int_to_half_bits(wf(2 * k + 1, n), x_elem) << 16);

        // ESTIMATES
        w->set_estimates({{0, 8192 / 4}, {0, 8192}});
        w_out->set_estimates({{0, 8192 / 2}, {0, 8192}});

        // THE SCHEDULE
        schedule_dequantize();
    }

private:
    Output<Buffer<>> *w_out = nullptr;
    Func wf{"wf"};

    // Dequantize for the cuBLAS path: 16-byte loads of W (16 int8) to two 16-byte stores of
    // x's dtype per thread, the exact int8 values encoded by shift, cheaper than the rounding
    // bf16 encoder (H200 times at the coalesced form below, gpu_checks_2026-12-04_h200_34a0b15.md).
    void schedule_dequantize() {
        const int vw = kStageVectorBytes / 4;  // words per vector
        w->dim(0).set_min(0).set_extent((w->dim(0).extent() / vw) * vw);
        w->dim(1).set_min(0).set_stride((w->dim(1).stride() / vw) * vw);
        w_out->dim(0).set_min(0).set_extent(w->dim(0).extent() * 2);
        w_out->dim(1).set_min(0).set_stride((w_out->dim(1).stride() / vw) * vw);
        // can_run gives W 16-byte aligned and the workspace is 256-byte aligned; unsaid,
        // Halide assumes 4 bytes and splits each 32-byte store into eight 4-byte ones.
        w->set_host_alignment(kStageVectorBytes);
        w_out->set_host_alignment(kStageVectorBytes);
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
};

class W8Rescale : public Generator<W8Rescale>, public Algorithm {
public:
    GeneratorParam<ElemType> x_type{"x_type", ElemType::bf16, schedx::elem_type_names()};      // bf16 | fp16
    GeneratorParam<ElemType> scale_type{"scale_type", ElemType::bf16, schedx::elem_type_names()};  // bf16 | fp32
    GeneratorParam<Words> sched{"schedule", Words::cuda_words, {{"cuda_words", Words::cuda_words}}};

    void configure() {
        set_types(x_type, scale_type);
        acc_in = add_input<Buffer<>>("acc", UInt(32), 2);  // y itself: the runtime binds both to one buffer
        scales = add_input<Buffer<>>("scales", scale_t(), 1);
        y = add_output<Buffer<>>("y", UInt(32), 2);
    }

    void generate() {
        // THE ALGORITHM
        // n counts words of two outputs here.
        auto scaled = [&](Expr bits, Expr col) {
            Expr s = scale_value((*scales)(clamp(col, 0, scales->dim(0).extent() - 1)));
            return schedx::float_to_half_bits(schedx::decode_to_float(bits, x_elem) * s, x_elem);
        };
        Expr word = (*acc_in)(n, m);
        (*y)(n, m) = scaled(word & schedx::u32(0xFFFF), 2 * n) | (scaled(word >> 16, 2 * n + 1) << 16);

        // ESTIMATES
        acc_in->set_estimates({{0, 8192}, {0, 1024}});
        estimate_scales_and_y(16);

        // THE SCHEDULE
        schedule_rescale();
    }

private:
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
            const int vw = kStageVectorBytes / 4;  // words per vector
            b.dim(0).set_min(0).set_extent((b.dim(0).extent() / vw) * vw);
            b.dim(1).set_min(0).set_stride((b.dim(1).stride() / vw) * vw);
            b.set_host_alignment(kStageVectorBytes);
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

// Epilogue of the cuBLAS path: elementwise over the fp32 GEMM result.
class W8Epilogue : public Generator<W8Epilogue>, public Algorithm {
public:
    GeneratorParam<ElemType> x_type{"x_type", ElemType::bf16, schedx::elem_type_names()};      // bf16 | fp16
    GeneratorParam<ElemType> scale_type{"scale_type", ElemType::bf16, schedx::elem_type_names()};  // bf16 | fp32
    GeneratorParam<bool> with_bias{"with_bias", false};
    GeneratorParam<General> sched{"schedule", General::cuda_general, {{"cuda_general", General::cuda_general}}};

    void configure() {
        set_types(x_type, scale_type);
        acc_in = add_input<Buffer<>>("acc", Float(32), 2);
        scales = add_input<Buffer<>>("scales", scale_t(), 1);
        if (with_bias) bias = add_input<Buffer<>>("bias", scale_t(), 1);
        y = add_output<Buffer<>>("y", UInt(16), 2);
    }

    void generate() {
        // THE ALGORITHM
        acc(n, m) = (*acc_in)(n, m);
        define_y();

        // ESTIMATES
        acc_in->set_estimates({{0, 8192}, {0, 1024}});
        estimate_scales_and_y(1024);

        // THE SCHEDULE
        y->gpu_tile(n, m, no, mo, ni, mi, 128, 2, TailStrategy::GuardWithIf);
    }
};

class W8Planes : public Generator<W8Planes>, public Algorithm {
public:
    GeneratorParam<ElemType> x_type{"x_type", ElemType::bf16, schedx::elem_type_names()};  // bf16 | fp16
    GeneratorParam<RowBlocks> sched{"schedule", RowBlocks::cuda_row_blocks, {{"cuda_row_blocks", RowBlocks::cuda_row_blocks}}};

    void configure() {
        set_types(x_type, ElemType::bf16);
        x = add_input<Buffer<>>("x", UInt(16), 2);
        // [3M rows][K + kPlanesRowPad]: row 3m + p is digit p of row m of x
        planes_out = add_output<Buffer<>>("planes", Int(8), 2);
    }

    void generate() {
        // THE ALGORITHM
        // Byte K of each row (after the K digits) holds e; the rest of the 16 is zero.
        Expr kx = x->dim(0).extent();
        Expr mc = clamp(m, 0, x->dim(1).extent() - 1);
        xf(k, m) = schedx::decode_to_float(cast<uint32_t>((*x)(clamp(k, 0, kx - 1), mc)), x_elem);
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

        // ESTIMATES
        x->set_estimates({{0, 8192}, {0, 16}});

        // THE SCHEDULE
        schedule_planes();
    }

private:
    Output<Buffer<>> *planes_out = nullptr;
    Var u{"u"};
    // max |x| bits, exponent field and integer q of each row
    Func xf{"xf"}, row_max{"row_max"}, row_exp{"row_exp"}, row_q{"row_q"};
    RDom row_rk;

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
};

class W8PlanesEpilogue : public Generator<W8PlanesEpilogue>, public Algorithm {
public:
    GeneratorParam<ElemType> x_type{"x_type", ElemType::bf16, schedx::elem_type_names()};      // bf16 | fp16
    GeneratorParam<ElemType> scale_type{"scale_type", ElemType::bf16, schedx::elem_type_names()};  // bf16 | fp32
    GeneratorParam<bool> with_bias{"with_bias", false};
    GeneratorParam<General> sched{"schedule", General::cuda_general, {{"cuda_general", General::cuda_general}}};

    void configure() {
        set_types(x_type, scale_type);
        acc_in = add_input<Buffer<>>("acc", Int(32), 2);  // the GEMM's [3M][N] int32
        planes_in = add_input<Buffer<>>("planes", Int(8), 2);  // for the exponents
        scales = add_input<Buffer<>>("scales", scale_t(), 1);
        if (with_bias) bias = add_input<Buffer<>>("bias", scale_t(), 1);
        y = add_output<Buffer<>>("y", UInt(16), 2);
    }

    void generate() {
        // THE ALGORITHM
        Expr kx = planes_in->dim(0).extent() - kPlanesRowPad;
        Expr e = cast<int32_t>(reinterpret<uint8_t>((*planes_in)(kx, 3 * m)));
        auto digit_sum = [&](int p) { return cast<double>((*acc_in)(n, 3 * m + p)); };
        Expr q = digit_sum(2) * Expr(65536.0) + digit_sum(1) * Expr(256.0) + digit_sum(0);  // exact below 2^53
        Expr down = reinterpret<double>(cast<uint64_t>(1023 + e - 148) << 52);
        acc(n, m) = select(e == 255, reinterpret<float>(schedx::u32(0x7FC00000)), cast<float>(q * down));
        define_y();

        // ESTIMATES
        acc_in->set_estimates({{0, 8192}, {0, 1024}});
        estimate_scales_and_y(16);

        // THE SCHEDULE: as w8_epilogue's
        y->gpu_tile(n, m, no, mo, ni, mi, 128, 2, TailStrategy::GuardWithIf);
    }

private:
    Input<Buffer<>> *planes_in = nullptr;
};

}  // namespace

HALIDE_REGISTER_GENERATOR(W8Dequantize, w8_dequantize)
HALIDE_REGISTER_GENERATOR(W8Rescale, w8_rescale)
HALIDE_REGISTER_GENERATOR(W8Epilogue, w8_epilogue)
HALIDE_REGISTER_GENERATOR(W8Planes, w8_planes)
HALIDE_REGISTER_GENERATOR(W8PlanesEpilogue, w8_planes_epilogue)
