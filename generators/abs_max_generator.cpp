// amax = max |x| over a 2-D matrix (NaN if any x is NaN), as float bits in a uint32.
// x is [M, K] with a leading dimension; K is the contiguous dimension, called x here, M
// is called y. |x| is reduced in the input format's own bits with the sign cleared:
// non-negative floats order like their bits and NaN bits exceed inf's, so an integer max
// is max |x| with NaN propagated; the result is decoded to float bits once per block.
#include "Halide.h"
#include "abs_max_layout.h"
#include "cuda_atomics.h"
#include "numerics.h"

namespace {

using namespace Halide;
using schedx::ElemType;
using schedx::u32;

constexpr schedx::abs_max_layout::Block kBlock{};

class AbsMax : public Generator<AbsMax> {
public:
    GeneratorParam<ElemType> in_type{"in_type", ElemType::bf16, schedx::elem_type_names()};
    // cpu | cuda (16-byte loads of 32-bit words: 16-byte aligned x and rows, K * element
    // bytes a multiple of 16) | cuda_general (element loads: any shape, pitch, alignment)
    GeneratorParam<std::string> sched{"schedule", "cpu"};
    // CUDA blocks: threads_x x threads_y threads; each loads load_words units (32-bit
    // words, or elements for cuda_general) of rows_per_thread rows, all before reducing.
    // Defaults: abs_max_layout.h's, which the runtime reads.
    GeneratorParam<int> threads_x{"threads_x", kBlock.threads_x};
    GeneratorParam<int> threads_y{"threads_y", kBlock.threads_y};
    GeneratorParam<int> rows_per_thread{"rows_per_thread", kBlock.rows_per_thread};
    GeneratorParam<int> load_words{"load_words", kBlock.load_words};
    // The cuda or cuda_general algorithm with no schedule, built for the CPU by tests
    // (tests/test_abs_max_blocks_cpu.cpp): the warp's REDUX becomes a max over its 32
    // threads and the block's RED a call of the C function schedx_test_atomic_max_u32,
    // which the test links. No variant sets it.
    GeneratorParam<bool> default_schedule{"default_schedule", false};

    void configure() {
        cuda = sched.value() != "cpu";
        word_io = sched.value() == "cuda";
        const bool half = in_type != ElemType::fp32;
        input = add_input<Buffer<>>("input", half && !word_io ? UInt(16) : UInt(32), 2);
        if (cuda) {
            // amax_address: the device address of the caller's amax (float bits), which the
            // runtime zeroes on the stream just before the kernel; each block takes its maximum
            // there by an atomic that no thread waits for. block_sink (one word per block, in a
            // workspace the runtime keeps per stream) is what those atomics are computed for;
            // its extent is the grid, one dimension (a grid's y and z stop at 65,535 blocks).
            amax_address = add_input<uint64_t>("amax_address");
            block_sink = add_output<Buffer<uint32_t, 1>>("block_sink");
        } else {
            amax = add_output<Buffer<uint32_t, 0>>("amax");
        }
    }

    void generate() {
        // THE ALGORITHM
        const bool half = in_type != ElemType::fp32;
        const uint32_t abs_mask = half ? 0x7FFF : 0x7FFFFFFF;
        input->dim(0).set_min(0);
        input->dim(1).set_min(0);
        Expr units = input->dim(0).extent(), m = input->dim(1).extent();
        if (!cuda) {
            // Strips of kStripRows rows; the last strip repeats the last row (max unchanged).
            // bf16 and fp16 reduce in 16 bits (the sign cleared, |x| is exact there), twice
            // the lanes of a vector, each strip's maximum decoded once.
            RDom r(0, units, 0, kStripRows, "r");
            strip_rdom = r;
            const Type max_t = half ? UInt(16) : UInt(32);
            strip_max(y) = cast(max_t, 0);
            strip_max(y) = max(strip_max(y), (*input)(r.x, min(y * kStripRows + r.y, m - 1)) & cast(max_t, u32(abs_mask)));
            RDom s(0, (m + kStripRows - 1) / kStripRows, "s");
            (*amax)() = u32(0);
            (*amax)() = max((*amax)(), float_bits(strip_max(s)));
        } else {
            // Block b covers threads_x * load_words units by threads_y * rows_per_thread rows;
            // blocks are numbered along the rows first. Its thread (x, y) loads unit i of its
            // row r into loaded(i, r, x, y, b). Units come in groups (a 16-byte vector, or one
            // element), one group per thread in a row of the block, so a warp's load is
            // contiguous; coordinates past the matrix are clamped (repeating an element leaves
            // the max unchanged), which keeps every load a whole aligned vector.
            const int TX = threads_x, TY = threads_y, R = rows_per_thread, LW = load_words;
            const int group = word_io ? 4 : 1;
            check_grid(TX, TY, R, LW, group);
            Var i("i"), r("r"), b("b");
            Expr groups = units / group;
            Expr blocks_x = (groups + TX * (LW / group) - 1) / (TX * (LW / group));
            Expr g = (b % blocks_x) * (TX * (LW / group)) + (i / group) * TX + x;
            Expr row = (b / blocks_x) * (TY * R) + r * TY + y;
            loaded(i, r, x, y, b) = (*input)(clamp(g, 0, groups - 1) * group + i % group, clamp(row, 0, m - 1));

            // Each thread's maximum. A word of bf16/fp16 holds two elements: the low halves'
            // maximum and the high halves' are kept apart (a mask and a max each, no shift).
            RDom t(0, LW, 0, R, "t");
            thread_rdom = t;
            Expr w = cast<uint32_t>(loaded(t.x, t.y, x, y, b));
            if (word_io && half) {
                thread_max(x, y, b) = Tuple(u32(0), u32(0));
                thread_max(x, y, b) = Tuple(max(thread_max(x, y, b)[0], w & u32(0x7FFF)),
                                            max(thread_max(x, y, b)[1], w & u32(0x7FFF0000)));
                thread_value(x, y, b) = max(thread_max(x, y, b)[0], thread_max(x, y, b)[1] >> 16);
            } else {
                thread_max(x, y, b) = u32(0);
                thread_max(x, y, b) = max(thread_max(x, y, b), w & u32(abs_mask));
                thread_value(x, y, b) = thread_max(x, y, b);
            }
            // Each warp's maximum by one REDUX, in every lane; the block's from the first lane
            // of each warp; one atomic max per block.
            if (default_schedule) {
                RDom lane(0, 32, "lane");
                Expr thread = (y * TX + x) / 32 * 32 + lane;
                warp_max(x, y, b) = maximum(thread_value(thread % TX, thread / TX, b));
            } else {
                warp_max(x, y, b) = schedx::warp_max_u32(thread_value(x, y, b));
            }
            RDom wr(0, TX * TY / 32, "w");
            warp_rdom = wr;
            block_max(b) = u32(0);
            block_max(b) = max(block_max(b), warp_max((wr * 32) % TX, (wr * 32) / TX, b));
            Expr bits = float_bits(block_max(b));
            (*block_sink)(b) = default_schedule ? Internal::Call::make(UInt(32), "schedx_test_atomic_max_u32",
                                                                      {*amax_address, bits}, Internal::Call::Extern)
                                                : schedx::device_atomic_u32_discarded("max", *amax_address, bits, b);
        }

        // ESTIMATES
        const int per_unit = word_io && half ? 2 : 1;
        input->set_estimates({{0, 8192 / per_unit}, {0, 8192}});
        if (block_sink) block_sink->set_estimates({{0, 4096}});

        // THE SCHEDULE
        if (using_autoscheduler()) return;
        if (cuda) {
            constrain_cuda_input();
            if (!default_schedule) schedule_cuda();
        } else {
            schedule_cpu();
        }
    }

private:
    static constexpr int kStripRows = 32;
    Var x{"x"}, y{"y"}, xo{"xo"}, yo{"yo"}, xi{"xi"}, yi{"yi"};
    bool cuda = false, word_io = false;
    Input<Buffer<>> *input = nullptr;
    Input<uint64_t> *amax_address = nullptr;
    Output<Buffer<uint32_t, 0>> *amax = nullptr;
    Output<Buffer<uint32_t, 1>> *block_sink = nullptr;
    Func strip_max{"strip_max"};  // CPU: max |x| bits per strip of rows
    Func loaded{"loaded"}, thread_max{"thread_max"}, thread_value{"thread_value"}, warp_max{"warp_max"},
        block_max{"block_max"};
    RDom strip_rdom, thread_rdom, warp_rdom;

    // The float bits of |x| from the input format's sign-cleared bits (order-preserving).
    Expr float_bits(Expr bits) { return reinterpret<uint32_t>(schedx::decode_to_float(bits, in_type)); }

    void check_grid(int TX, int TY, int R, int LW, int group) const {
        const bool warps = TX * TY % 32 == 0 && (TX % 32 == 0 || 32 % TX == 0);
        if (!(TX >= 1 && TY >= 1 && R >= 1 && LW >= group && LW % group == 0 && TX * TY <= 1024 && warps)) {
            throw std::invalid_argument("threads_x, threads_y, rows_per_thread and load_words make no valid block");
        }
    }

    // CPU (no GPU; CI): strips of rows in parallel, each reduced in vector lanes. bf16 2048^2,
    // one thread: 1.49 ms against 1.45 for a read of x and 3.10 for torch's abs().max()
    // (build machine, noisy, alternated).
    void schedule_cpu() {
        const int lanes = natural_vector_size(strip_max.type()) * 2;
        Var lane("lane");
        RVar rxo("rxo"), rxi("rxi");
        strip_max.compute_root().parallel(y);
        strip_max.update().parallel(y);
        Func per_lane = strip_max.update().split(strip_rdom.x, rxo, rxi, lanes).rfactor(rxi, lane);
        per_lane.compute_at(strip_max, y).vectorize(lane);
        per_lane.update().vectorize(lane);
    }

    // What the CUDA kernels' loads assume of the input and the block sink (the CPU builds too).
    void constrain_cuda_input() {
        block_sink->dim(0).set_min(0);
        if (word_io) {
            // 16-byte vectors: whole groups of 4 words, 16-byte aligned rows and base.
            Expr w = input->dim(0).extent();
            input->dim(0).set_extent((w / 4) * 4);
            input->dim(1).set_stride((input->dim(1).stride() / 4) * 4);
            input->set_host_alignment(schedx::abs_max_layout::kWordVectorBytes);
        }
    }

    // One block per threads_x * load_words units by threads_y * rows_per_thread rows; every
    // thread's loads are issued into registers before its reduction (16-byte vectors for word
    // I/O), its warp meets in one REDUX, one thread folds the warps' maxima from shared memory
    // and issues the block's RED. H200: t32x8r16w4, the best at every shape, 94-99% of a
    // read-only kernel, 33.8 us at bf16 8192^2 (gpu_checks_2026-12-05_h200_d4b62eb.md); the
    // element-load pass it replaced: 2.0-2.3 TB/s.
    void schedule_cuda() {
        const int TX = threads_x, TY = threads_y, group = word_io ? 4 : 1;
        // One thread per block issues its atomic (split by 1 so that the loops carry names).
        Var b = block_sink->args()[0], bo("bo"), bi("bi");
        block_sink->split(b, bo, bi, 1).gpu_blocks(bo).gpu_threads(bi);
        block_max.compute_at(*block_sink, bi).update().unroll(warp_rdom.x);
        // The whole thread grid of the block (RoundUp: the warps' first lanes alone are
        // what block_max reads).
        warp_max.compute_at(*block_sink, bo)
            .store_in(MemoryType::GPUShared)
            .split(x, xo, xi, TX, TailStrategy::RoundUp)
            .split(y, yo, yi, TY, TailStrategy::RoundUp)
            .reorder(xi, yi, xo, yo)
            .gpu_threads(xi, yi);
        thread_max.compute_at(warp_max, xi).update().unroll(thread_rdom.x).unroll(thread_rdom.y);
        Var i = loaded.args()[0], r = loaded.args()[1], io("io"), ii("ii");
        loaded.compute_at(warp_max, xi).store_in(MemoryType::Register).split(i, io, ii, group).unroll(io).unroll(r);
        if (group > 1) loaded.vectorize(ii);
    }
};

}  // namespace

HALIDE_REGISTER_GENERATOR(AbsMax, abs_max)
