// w8_linear's lane layouts (w8_linear_algorithm.h): a warp's 32 lanes walk K over 16-byte
// words of W and x. w8_linear_lanes: a warp owns R columns and B rows of y (cuda_gemv at
// B = 1, cuda_smallbatch); w8_linear_splitk: a block's warps share one column's K.
#include "w8_linear_algorithm.h"

namespace {

using namespace schedx::w8;
using schedx::ElemType;

enum class WarpRows { gemv, smallbatch };

class W8LinearLanes : public Generator<W8LinearLanes>, public LaneAlgorithm {
public:
    GeneratorParam<ElemType> x_type{"x_type", ElemType::bf16, schedx::elem_type_names()};      // bf16 | fp16
    GeneratorParam<ElemType> scale_type{"scale_type", ElemType::bf16, schedx::elem_type_names()};  // bf16 | fp32
    GeneratorParam<bool> with_bias{"with_bias", false};
    // One schedule: cuda_gemv is cuda_smallbatch at batch 1.
    GeneratorParam<WarpRows> sched{"schedule", WarpRows::smallbatch,
                                   {{"cuda_gemv", WarpRows::gemv}, {"cuda_smallbatch", WarpRows::smallbatch}}};
    // Defaults of the layout's parameters: schedx::w8::Layout's (w8_linear_layout.h), which the runtime reads.
    GeneratorParam<int> rows_per_warp{"rows_per_warp", kLayout.rows_per_warp};
    GeneratorParam<int> load_words{"load_words", kLayout.load_words};
    GeneratorParam<int> warps{"warps", 4};  // warps per block
    GeneratorParam<int> batch{"batch", kLayout.batch};
    // A lane's load_words W words per step as load_words / vector_words vectors 32 vectors
    // apart, so that each warp-wide load reads 32 contiguous vectors (false: one contiguous
    // run per lane, 4 * load_words bytes apart).
    GeneratorParam<bool> coalesced_runs{"coalesced", false};
    // W's loads carry an evict-first L2 policy (the runtime's PTX rewrite,
    // generators/ptx_extern.h) instead of running under the runtime's L2 streaming window.
    // H200, dirty L2: ties the window at M = 1 (23.35 against 23.39 us at 8192^2), M = 4 1.1% faster.
    GeneratorParam<bool> evict_first_loads{"evict_first", false};
    // W's vector width in words (4: 16-byte loads; 2 and 1 for rows of W only 8- or 4-byte
    // aligned, K = 4100 say). x's vectors are twice as wide, at most 16 bytes.
    GeneratorParam<int> vector_words{"vector_words", kLayout.vector_words};
    // K in whole vectors (4 * vector_words elements) instead of whole steps; the part past
    // the last whole step is one more, guarded, update.
    GeneratorParam<bool> k_tail{"k_tail", kLayout.k_tail};
    // With k_tail: x and W as elements, for any K, row pitch and pointer alignment (K = 11009,
    // say): lane l takes elements 32 j + l of a step, so each warp-wide load reads 32
    // contiguous elements.
    GeneratorParam<bool> elements{"element_io", false};
    // The algorithm with its buffer constraints but Halide's default schedule: tests build the
    // lane layout for the CPU (tests/test_w8_lanes_cpu.cpp). No variant sets it.
    GeneratorParam<bool> default_schedule{"default_schedule", false};

    void configure() {
        set_types(x_type, scale_type);
        coalesced = coalesced_runs;
        evict_first = evict_first_loads;
        element_io = elements;
        layout = {true, false, 1, load_words, vector_words, k_tail, rows_per_warp, batch};
        if (element_io && (!k_tail || coalesced || evict_first || vector_words != 4)) {
            throw std::invalid_argument("element_io takes k_tail, and neither coalesced, evict_first nor vector_words");
        }
        if (vector_words != 4 && vector_words != 2 && vector_words != 1) throw std::invalid_argument("vector_words is 1, 2 or 4");
        if (coalesced && int(load_words) % int(vector_words) != 0) {
            throw std::invalid_argument("coalesced takes load_words a multiple of vector_words");
        }
        const Type half_t = element_io ? UInt(16) : UInt(32);
        x = add_input<Buffer<>>("x", half_t, 2);
        w = add_input<Buffer<>>("w", element_io ? Int(8) : UInt(32), 2);
        scales = add_input<Buffer<>>("scales", scale_t(), 1);
        if (with_bias) bias = add_input<Buffer<>>("bias", scale_t(), 1);
        y = add_output<Buffer<>>("y", UInt(16), 2);
    }

    void generate() {
        // THE ALGORITHM
        define_magic(get_target(), using_autoscheduler());
        define_lane_elements();
        define_lane_sums();
        define_y();

        // ESTIMATES
        const int epw = element_io ? 1 : 2, wpw = element_io ? 1 : 4;
        x->set_estimates({{0, 8192 / epw}, {0, 16}});
        w->set_estimates({{0, 8192 / wpw}, {0, 8192}});
        estimate_scales_and_y(16);

        // THE SCHEDULE
        if (!element_io) constrain_words();
        if (!default_schedule) schedule_cuda_warp_rows();
    }

private:
    // A warp owns rows_per_warp columns n of y and `batch` rows m; each lane loads load_words
    // W words per column in 16-byte accesses and the matching x words once, keeps one sum per
    // output in registers (int8 to float by one PRMT and one add), and the lanes meet in five
    // shuffle halvings. H200, N = K = 8192: M = 1 gemv_r2w8_coalesced 19.3 us, 82% of a copy
    // (w8_l2_window_2026-12-03_h200_bfb14d0.md); the register caps, tile widths and what
    // lost: docs/w8_linear.md.
    void schedule_cuda_warp_rows() {
        const int R = rows_per_warp, B = batch, WB = warps;
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
};

enum class SplitK { cuda_splitk };

class W8LinearSplitK : public Generator<W8LinearSplitK>, public LaneAlgorithm {
public:
    GeneratorParam<ElemType> x_type{"x_type", ElemType::bf16, schedx::elem_type_names()};      // bf16 | fp16
    GeneratorParam<ElemType> scale_type{"scale_type", ElemType::bf16, schedx::elem_type_names()};  // bf16 | fp32
    GeneratorParam<bool> with_bias{"with_bias", false};
    GeneratorParam<SplitK> sched{"schedule", SplitK::cuda_splitk, {{"cuda_splitk", SplitK::cuda_splitk}}};
    GeneratorParam<int> rows_per_warp{"rows_per_warp", kLayout.rows_per_warp};  // columns per block
    GeneratorParam<int> load_words{"load_words", kLayout.load_words};
    GeneratorParam<int> split_k{"split_k", kLayout.split_k};  // warps sharing a column's K
    // As w8_linear_lanes' evict_first. Split-K interleaves single groups among its warps: a
    // lane's run is one group, never coalesced.
    GeneratorParam<bool> evict_first_loads{"evict_first", false};

    void configure() {
        set_types(x_type, scale_type);
        evict_first = evict_first_loads;
        layout = {true, false, split_k, load_words, kLayout.vector_words, false, rows_per_warp, kLayout.batch};
        x = add_input<Buffer<>>("x", UInt(32), 2);
        w = add_input<Buffer<>>("w", UInt(32), 2);
        scales = add_input<Buffer<>>("scales", scale_t(), 1);
        if (with_bias) bias = add_input<Buffer<>>("bias", scale_t(), 1);
        y = add_output<Buffer<>>("y", UInt(16), 2);
    }

    void generate() {
        // THE ALGORITHM
        define_magic(get_target(), using_autoscheduler());
        define_lane_elements();
        define_lane_sums();
        define_y();

        // ESTIMATES
        x->set_estimates({{0, 8192 / 2}, {0, 16}});
        w->set_estimates({{0, 8192 / 4}, {0, 8192}});
        estimate_scales_and_y(16);

        // THE SCHEDULE
        constrain_words();
        schedule_cuda_splitk();
    }

private:
    // Small N: with a warp per few columns, N = 1024 fills only a fraction of the GPU and
    // each warp walks its whole row. Here a block owns rows_per_warp columns and split_k
    // warps share their K range, each in the GEMV's lane layout over every split_k-th
    // group; the parts meet in shared memory and one thread per column adds them.
    // H200, M = 1, (N, K) = (1024, 14336): splitk4_r2w4 8.30 us against 11.60 for the best
    // GEMV (explore_w8_splitk_2026-12-03_h200_140082f.md). S = 4 is the widest split whose
    // step (2048) divides K = 14336.
    void schedule_cuda_splitk() {
        const int R = rows_per_warp, S = split_k;
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
};

}  // namespace

HALIDE_REGISTER_GENERATOR(W8LinearLanes, w8_linear_lanes)
HALIDE_REGISTER_GENERATOR(W8LinearSplitK, w8_linear_splitk)
