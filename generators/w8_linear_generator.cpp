// w8_linear's dot product as written (w8_linear_algorithm.h): each output a sum over K of
// x's and W's elements. Scheduled for the CPU, for any CUDA shape (the reference the tuned
// families are checked against) and by the autoschedulers.
#include "w8_linear_algorithm.h"

namespace {

using namespace schedx::w8;
using schedx::ElemType;

enum class Form { cpu, cuda_general, autoscheduled };

class W8Linear : public Generator<W8Linear>, public Algorithm {
public:
    GeneratorParam<ElemType> x_type{"x_type", ElemType::bf16, schedx::elem_type_names()};      // bf16 | fp16
    GeneratorParam<ElemType> scale_type{"scale_type", ElemType::bf16, schedx::elem_type_names()};  // bf16 | fp32
    GeneratorParam<bool> with_bias{"with_bias", false};
    GeneratorParam<Form> sched{"schedule", Form::cpu,
                               {{"cpu", Form::cpu}, {"cuda_general", Form::cuda_general}, {"auto", Form::autoscheduled}}};
    // cpu: a register tile of rows_per_warp rows of W by batch rows of x.
    GeneratorParam<int> rows_per_warp{"rows_per_warp", kLayout.rows_per_warp};
    GeneratorParam<int> batch{"batch", kLayout.batch};

    void configure() {
        set_types(x_type, scale_type);
        x = add_input<Buffer<>>("x", UInt(16), 2);
        w = add_input<Buffer<>>("w", Int(8), 2);
        scales = add_input<Buffer<>>("scales", scale_t(), 1);
        if (with_bias) bias = add_input<Buffer<>>("bias", scale_t(), 1);
        y = add_output<Buffer<>>("y", UInt(16), 2);
    }

    void generate() {
        // THE ALGORITHM
        define_magic(get_target(), using_autoscheduler());
        Expr nc = w_column();
        if (w_magic.defined()) {
            wf(k, n) = schedx::int8_of_word_to_float(cast<uint32_t>(reinterpret<uint8_t>((*w)(k, nc))), 0, w_magic);
        } else {
            // The CPU converts int8 vectors by widening (vpmovsxbd, vcvtdq2ps: 2 instructions
            // a vector against the bit trick's 5 there); both exact.
            wf(k, n) = cast<float>((*w)(k, nc));
        }
        xbits(k, m) = cast<uint32_t>((*x)(k, x_row()));
        xf(k, m) = schedx::decode_to_float(xbits(k, m), x_elem);
        r = RDom(0, w->dim(0).extent(), "r");
        acc(n, m) = 0.0f;
        acc(n, m) += xf(r, m) * wf(r, n);
        define_y();

        // ESTIMATES
        x->set_estimates({{0, 8192}, {0, 16}});
        w->set_estimates({{0, 8192}, {0, 8192}});
        estimate_scales_and_y(16);

        // THE SCHEDULE
        if (using_autoscheduler()) return;
        if (sched == Form::cpu) {
            schedule_cpu();
        } else {
            schedule_cuda_general();
        }
    }

private:
    Var nt{"nt"}, u{"u"}, v{"v"};
    Func xbits{"xbits"}, xf{"xf"}, wf{"wf"};
    RDom r;

    // CPU: each output is one dot product of two contiguous rows, vectorized along K with
    // the partial sums in vector lanes (rfactor). A register tile of R = rows_per_warp rows of
    // W and B = batch rows of x keeps its R x B vectors of sums in registers through all of K,
    // so each converted W vector serves B outputs and each x vector R; tiles of 4 R rows of W
    // run in parallel. Rows beyond M or N read clamped copies and are never stored. Build
    // machine (2 shared Zen 4 cores, one thread, noisy), N = K = 4096: M = 1, R = 8: 700 us
    // (AVX-512) / 790 us (AVX2) against R = 1's 1250 and aten's 1150; M = 16, B = R = 4 (AVX-512):
    // 6.7 ms against aten's 8.0. A tile past the target's registers spills (cpu_tile_vectors):
    // the inner unrolled loop runs over the smaller of R and B, whose operands stay live across
    // the outer one. B = 4, R = 3 with W's rows inner fits AVX2's 16 (x's inner, 17, spilled):
    // M = 4, N = K = 4096, AVX2, one thread, 2.64 against 3.26 ms for B = 4, R = 2 (Halide JIT).
    void schedule_cpu() {
        const int vec = natural_vector_size<float>(), R = rows_per_warp, B = batch;
        Layout tile;
        tile.rows_per_warp = R;
        tile.batch = B;
        if (tile.cpu_tile_vectors() > schedx::kCpuMaxVectorRegisters) {
            throw std::invalid_argument("a register tile of rows_per_warp x batch vectors spills on every CPU target");
        }
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
        if (tile.cpu_inner_rows() == B) {
            intm.update().reorder(v, m, n, ro);
        } else {
            intm.update().reorder(v, n, m, ro);
        }
        intm.update().vectorize(v).unroll(n).unroll(m);
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
};

}  // namespace

HALIDE_REGISTER_GENERATOR(W8Linear, w8_linear)
