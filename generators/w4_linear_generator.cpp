// w4_linear for the CPU, CUDA cores and any shape (w4_linear_algorithm.h has the operator).
//
// Every schedule computes each group as dot - z * xsum (dot = sum x * u, xsum = sum x; the CPU
// and cuda_general per lane of a float vector): the zero point costs one multiply-add per group
// instead of a subtraction per weight, and xsum is shared by every row of W.
#include "w4_linear_algorithm.h"

namespace {

using namespace schedx::w4;
using schedx::ElemType;

class W4Linear : public Generator<W4Linear>, public Algorithm {
public:
    GeneratorParam<ElemType> x_type{"x_type", ElemType::bf16, schedx::elem_type_names()};      // bf16 | fp16
    GeneratorParam<ElemType> scale_type{"scale_type", ElemType::bf16, schedx::elem_type_names()};  // bf16 | fp16
    GeneratorParam<std::string> sched{"schedule", "cpu"};  // cpu | cuda_general | cuda_gemv | cuda_smallbatch
    GeneratorParam<int> rows_per_warp{"rows_per_warp", 4};  // cuda lanes: rows of W per warp; cpu: per register tile
    GeneratorParam<int> warps{"warps", 4};                  // cuda lanes: warps per block
    GeneratorParam<int> batch{"batch", 1};                  // cpu, cuda_smallbatch: rows of x per register tile
    // The algorithm of `schedule` with its buffer constraints but Halide's default schedule:
    // tests build the lane layout for the CPU (tests/test_w4_linear_cpu.cpp). No variant sets it.
    GeneratorParam<bool> default_schedule{"default_schedule", false};

    void configure() {
        const std::string s = sched;
        if (s != "cpu" && s != "cuda_general" && s != "cuda_gemv" && s != "cuda_smallbatch") {
            throw std::invalid_argument("unknown schedule " + s);
        }
        lanes = s == "cuda_gemv" || s == "cuda_smallbatch";
        // The lane layout reads x as words of two elements and W's vectors as 16-byte loads.
        declare_buffers(*this, x_type, scale_type, lanes);
    }

    void generate() {
        // THE ALGORITHM
        const Expr G = 32 * (*group_size / 32);  // whole vectors of 32, as the runtime checks
        Expr groups = scales->dim(0).extent();
        define_scales();
        if (lanes) {
            define_lane_sum(groups * G);
        } else {
            define_vector_sums(G, groups);
        }
        define_y();

        // ESTIMATES
        estimate_buffers(lanes ? 2 : 1, 1);

        // THE SCHEDULE
        if (lanes) constrain_words();
        if (default_schedule) return;
        const std::string s = sched;
        if (s == "cpu") schedule_cpu();
        else if (s == "cuda_general") schedule_cuda_general();
        else if (s == "cuda_gemv") schedule_cuda_gemv();
        else schedule_cuda_smallbatch();
    }

private:
    Var p{"p"}, e{"e"}, l{"l"}, c{"c"}, u{"u"};
    Var no{"no"}, ni{"ni"}, nw{"nw"}, nl{"nl"}, nt{"nt"}, mo{"mo"}, mi{"mi"};
    bool lanes = false;
    // The vector lanes' layout: x by lane, each lane's word of W shifted to its part, its nibbles,
    // per-lane sums of x, of x (u - z) per group, and of the scaled groups.
    Func xl{"xl"}, xs{"xs"}, wl{"wl"}, ul{"ul"}, xsum{"xsum"}, dot{"dot"}, lsum{"lsum"};
    int L = 0, P = 0;
    RDom rd, rg, rl, re, rc;
    // The lane layout: a lane's words of W and x per vector, its vector's x and weights, sums.
    Func w_rows{"w_rows"}, x_rows{"x_rows"}, xr{"xr"}, wq{"wq"}, vdot{"vdot"}, vxsum{"vxsum"};
    Func lane_sum{"lane_sum"};
    std::vector<Func> lane_tree;

    // The CPU's and cuda_general's sums: a chunk of 32 elements (4 W words) fills the L lanes
    // of one float vector (8 with AVX2, 16 with AVX-512), lane l taking word l % 4's part l / 4
    // (P = 32 / L nibbles): one 16-byte load of W and one shift per chunk and row. Each lane sums
    // x (u - z) over its elements of a group (-z times the lane's sum of x, computed once per
    // call, as the start), the group's scale multiplies the lanes' sums as a vector, and the
    // lanes are folded once per output, not once per group.
    void define_vector_sums(Expr G, Expr groups) {
        // At least 8 lanes (two vectors where the target's has 4): P <= 4 nibbles per part keeps
        // u 16^p below 2^16, where the signed conversion is exact.
        L = std::max(8, natural_vector_size<float>());
        P = schedx::w4::kVectorElems / L;
        if (schedx::w4::kVectorElems % L != 0) throw std::invalid_argument("a float vector of 8 or 16 lanes");
        Expr word = 4 * c + l % 4, nib = (l / 4) * P + p;
        xl(p, l, c, m) = decode(x_elem, (*x)(8 * word + nib, x_row(m)));
        // Nibble p of a lane's part is taken in place, u 16^p (an AND and a conversion, no shift
        // per nibble), against x 16^-p: both exact, unless |x| < 2^-114 (fp32's subnormals).
        xs(p, l, c, m) = xl(p, l, c, m) * reinterpret<float>(cast<uint32_t>(127 - 4 * p) << 23);
        wl(l, c, n) = (*w)(word, w_row(n)) >> cast<uint32_t>(4 * P * (l / 4));
        ul(p, l, c, n) = cast<float>(cast<int32_t>(wl(l, c, n) & (schedx::u32(0xF) << cast<uint32_t>(4 * p))));
        Expr chunks = G / schedx::w4::kVectorElems;
        rd = RDom(0, P, 0, chunks, "rd");  // a lane's nibble, the group's chunk
        xsum(l, g, m) = 0.0f;
        xsum(l, g, m) += xl(rd.x, l, g * chunks + rd.y, m);
        dot(l, g, n, m) = -zf(g, n) * xsum(l, g, m);
        dot(l, g, n, m) += xs(rd.x, l, g * chunks + rd.y, m) * ul(rd.x, l, g * chunks + rd.y, n);
        rg = RDom(0, groups, "rg");
        lsum(l, n, m) = 0.0f;
        lsum(l, n, m) += sf(rg, n) * dot(l, rg, n, m);
        rl = RDom(0, L, "rl");
        acc(n, m) = 0.0f;
        acc(n, m) += lsum(rl, n, m);
    }

    // cuda_gemv: K as vectors of 32 elements (4 W words, 16 x words); lane l of a warp takes
    // vectors 32c + l, so each warp-wide load of W reads 512 contiguous bytes. Nibble i of a
    // word becomes a float by one AND-OR into 2^23's mantissa (bits 4p..4p+3 of the word give
    // 2^23 + u * 16^p, p = i for i < 5; nibbles 5..7 from the word shifted right by 12, p = i - 3:
    // position 5 would reach the exponent) and one FFMA, (2^23 + u 16^p) 16^-p - 2^23 16^-p = u
    // (exact: every step is); x needs no scaling, so that a small batch's rows share it. Each
    // weight costs LOP3, FFMA and one FFMA per row of x (17 instructions per 8 weights and row
    // with the shift). The lanes meet in five shuffle halvings.
    void define_lane_sum(Expr kk) {
        using schedx::w4::kVectorElems;
        Expr vectors = kk / kVectorElems;
        Expr chunks = (vectors + 31) / 32;
        Expr vec = min(c * 32 + l, vectors - 1);  // lanes past K re-read the last vector and add 0
        w_rows(e, l, c, n) = (*w)(vec * (kVectorElems / 8) + e, w_row(n));
        x_rows(e, l, c, m) = (*x)(vec * (kVectorElems / 2) + e, x_row(m));
        Expr p = select(e % 8 < 5, e % 8, e % 8 - 3);  // the nibble's position in the (shifted) word
        Expr half = (x_rows(e / 2, l, c, m) >> cast<uint32_t>((e % 2) * 16)) & schedx::u32(0xFFFF);
        xr(e, l, c, m) = decode(x_elem, half);
        Expr word = w_rows(e / 8, l, c, n);
        Expr src = select(e % 8 < 5, word, word >> 12);
        // 2^23's bits as a value ptxas cannot fold (W's row pitch is at least K / 8 > 0): with two
        // constants, AND and OR became two LOP3s, with one of them in a register one.
        Expr magic = select(w->dim(1).stride() > 0, schedx::u32(0x4B000000), schedx::u32(0));
        Expr bits = (src & (schedx::u32(0xF) << cast<uint32_t>(4 * p))) | magic;
        // 16^-p and -2^23 16^-p from their bits: as a product, Halide's simplifier factored the
        // FFMA back into FADD and FMUL.
        Expr inv = reinterpret<float>(cast<uint32_t>(127 - 4 * p) << 23);
        Expr minus_magic = reinterpret<float>(cast<uint32_t>(127 + 23 - 4 * p) << 23 | schedx::u32(0x80000000));
        wq(e, l, c, n) = reinterpret<float>(bits) * inv + minus_magic;
        re = RDom(0, kVectorElems, "re");
        vdot(l, c, n, m) = 0.0f;
        vdot(l, c, n, m) += xr(re, l, c, m) * wq(re, l, c, n);
        vxsum(l, c, m) = 0.0f;
        vxsum(l, c, m) += xr(re, l, c, m);
        rc = RDom(0, chunks, "rc");
        Expr gv = min(rc * 32 + l, vectors - 1) * kVectorElems / (32 * (*group_size / 32));
        Expr term = sf(gv, n) * (vdot(l, rc, n, m) - zf(gv, n) * vxsum(l, rc, m));
        lane_sum(l, n, m) = 0.0f;
        lane_sum(l, n, m) += select(rc * 32 + l < vectors, term, 0.0f);
        Func level = lane_sum;
        for (int shift = 16; shift >= 1; shift /= 2) {
            Func sum("lanes_sum_" + std::to_string(32 / shift));
            sum(l, n, m) = level(l, n, m) + level(min(l + shift, 31), n, m);
            lane_tree.push_back(sum);
            level = sum;
        }
        acc(n, m) = level(0, n, m);
    }

    // The lane layout's buffers start at 0, K in whole vectors, rows 16-byte vectors apart,
    // so that Halide proves each vector load aligned (the 128-bit access rule).
    void constrain_words() {
        using namespace schedx::w4;
        x->dim(0).set_min(0).set_extent((x->dim(0).extent() / (kVectorElems / 2)) * (kVectorElems / 2));
        x->dim(1).set_min(0).set_stride((x->dim(1).stride() / 4) * 4);
        w->dim(0).set_min(0).set_extent(x->dim(0).extent() / 4);
        w->dim(1).set_min(0).set_stride((w->dim(1).stride() / 4) * 4);
    }

    // A register tile of R rows of W by B rows of x keeps its R x B lane sums of a group and
    // of the scaled groups in vectors; each W vector is unpacked once for B rows of x, each x
    // vector serves R rows of W. x by lane and its sums once per call. Tiles of 4 R rows of W
    // run in parallel. One AVX2 thread, N = K = 4096: r4 M = 1 2.19 ms (1.31x aten's int4pack),
    // b4_r2 M = 4 3.68 ms (1.48x), M = 16 11.6 ms (1.39x); R = 2 or 3, B = 2 or 8 lost. One
    // AVX-512 thread: b4_r3 M = 4 1.70 ms against b4_r2's 1.89, M = 16 6.46 against 7.03.
    void schedule_cpu() {
        const int R = rows_per_warp, B = batch;
        if (schedx::w4::cpu_tile_vectors(R, B) > schedx::kCpuMaxVectorRegisters) {
            throw std::invalid_argument("a register tile of rows_per_warp x batch vectors spills on every CPU target");
        }
        y->split(n, nt, n, 4 * R, TailStrategy::GuardWithIf)
            .split(n, no, ni, R, TailStrategy::GuardWithIf)
            .split(m, mo, mi, B, TailStrategy::GuardWithIf)
            .reorder(ni, mi, mo, no, nt)
            .parallel(nt);
        acc.compute_at(*y, mo).bound_extent(n, R).bound_extent(m, B).unroll(n).unroll(m);
        acc.update().reorder(n, m, rl).unroll(n).unroll(m);
        lsum.compute_at(*y, mo).bound_extent(l, L).bound_extent(n, R).bound_extent(m, B)
            .reorder_storage(l, n, m).vectorize(l).unroll(n).unroll(m);
        lsum.update().reorder(l, m, n, rg).vectorize(l).unroll(n).unroll(m);
        dot.compute_at(lsum, rg).bound_extent(l, L).bound_extent(n, R).bound_extent(m, B)
            .reorder_storage(l, n, m, g).vectorize(l).unroll(n).unroll(m);
        dot.update().reorder(l, m, rd.x, n, rd.y).vectorize(l).unroll(n).unroll(m).unroll(rd.x);
        // The lanes' words as one vector (a 16-byte load broadcast to the L lanes).
        wl.compute_at(dot, rd.y).bound_extent(l, L).bound_extent(n, R).vectorize(l).unroll(n);
        xs.compute_root().reorder_storage(l, p, c, m).vectorize(l).unroll(p).parallel(m);
        xsum.compute_root().vectorize(l).parallel(m);
        xsum.update().reorder(l, rd.x, rd.y, g).vectorize(l).parallel(m);
        // W's rows 8 KiB ahead (16384 / group_size groups of group_size / 2 bytes), prefetched:
        // without it a cold W cost M = 1 1.5x (1320 against 861 us, 4096^2, AVX-512, one thread).
        lsum.update().prefetch(ImageParam(*w), rg, rg, 16384 / *group_size, PrefetchBoundStrategy::NonFaulting);
    }

    // Any shape, leading dimension and alignment: one warp per output, its lanes taking every
    // 32nd group with element loads, each with the L lane sums in registers (x's recomputed
    // per group: no allocation per call). The reference the lane layout is checked against.
    // Not yet timed.
    void schedule_cuda_general() {
        RVar ro("ro"), ru("ru");
        y->split(n, no, nw, 8, TailStrategy::GuardWithIf)
            .split(nw, nw, nl, 1)
            .reorder(nl, nw, no, m)
            .gpu_blocks(no, m)
            .gpu_threads(nl, nw);
        Func intm = lsum.update().split(rg, ro, ru, 32, TailStrategy::GuardWithIf).rfactor(ru, u);
        intm.compute_at(*y, nw).bound_extent(l, L).bound_extent(n, 1).bound_extent(m, 1).unroll(l).gpu_lanes(u);
        intm.update().unroll(l).gpu_lanes(u);
        // The fold over the lanes unrolled, so that the per-lane sums stay in registers.
        acc.update().unroll(rl);
    }

    // The lane kernels' warps: each owns R rows of W by B rows of x (blocks of `warps` warps
    // along N, of B rows along M), its lanes' per-row sums in registers, met in five shuffle
    // halvings; W's words per lane, vector and row as one 16-byte load.
    void schedule_lane_warps(int B) {
        const int R = rows_per_warp, WB = warps;
        y->split(n, no, ni, R * WB, TailStrategy::GuardWithIf)
            .split(ni, nw, ni, R, TailStrategy::GuardWithIf)
            .split(nw, nw, nl, 1)
            .split(m, mo, mi, B, TailStrategy::GuardWithIf)
            .reorder(ni, mi, nl, nw, no, mo)
            .unroll(ni)
            .unroll(mi)
            .gpu_blocks(no, mo)
            .gpu_threads(nl, nw);
        auto per_lane = [&](Func f) {
            f.compute_at(*y, nw).bound_extent(l, 32).bound_extent(n, R).bound_extent(m, B).unroll(n).unroll(m);
            f.gpu_lanes(l);
        };
        per_lane(lane_sum);
        lane_sum.update().reorder(m, n, rc, l).unroll(m).unroll(n).gpu_lanes(l);
        for (Func &sum : lane_tree) per_lane(sum);
        vdot.compute_at(lane_sum, rc).bound_extent(l, 1).bound_extent(c, 1).bound_extent(n, R).bound_extent(m, B)
            .unroll(n).unroll(m);
        vxsum.compute_at(lane_sum, rc).bound_extent(l, 1).bound_extent(c, 1).bound_extent(m, B).unroll(m);
        w_rows.compute_at(lane_sum, rc).store_in(MemoryType::Register).bound_extent(e, schedx::w4::kVectorElems / 8)
            .bound_extent(l, 1).bound_extent(c, 1).bound_extent(n, R).vectorize(e).unroll(n);
    }

    // M = 1 (and any M, one pass over W per row of x): a warp owns R rows of W, each lane its
    // vectors' 4 W words per row and 16 x words (four 16-byte loads), x decoded once per vector
    // into registers, the scale and zero point applied once per vector; define_lane_sum has the
    // unpack. H200, dirty L2: 61-72% of a read-only kernel (gemv_r4 22.0 us at N = K = 8192).
    void schedule_cuda_gemv() {
        schedule_lane_warps(1);
        vdot.update().reorder(n, m, re).unroll(n).unroll(m).unroll(re);
        vxsum.update().unroll(re);
        xr.compute_at(lane_sum, rc).store_in(MemoryType::Register).bound_extent(e, schedx::w4::kVectorElems)
            .bound_extent(l, 1).bound_extent(c, 1).bound_extent(m, 1).unroll(e).unroll(m);
        Var kw("kw");
        x_rows.compute_at(lane_sum, rc).store_in(MemoryType::Register).bound_extent(e, schedx::w4::kVectorElems / 2)
            .bound_extent(l, 1).bound_extent(c, 1).bound_extent(m, 1).split(e, e, kw, 4).vectorize(kw).unroll(e)
            .unroll(m);
    }

    // M = 2..16: the GEMV's warps with B rows of x (W read once per B rows instead of once per
    // row), the vector taken a W word (8 elements) at a time: the B rows' 4 x words (one 16-byte
    // load each) are loaded there, and each unpacked weight feeds B accumulators
    // (LLVM keeps one unpack per weight, its uses unrolled in one block). The x sums run in the
    // same chunk loop (compute_with), so that x's words are loaded once. Not yet timed.
    void schedule_cuda_smallbatch() {
        const int B = batch;
        schedule_lane_warps(B);
        RVar ro("ro"), ri("ri");
        vdot.update().split(re, ro, ri, 8).reorder(m, n, ri, ro).unroll(m).unroll(n).unroll(ri).unroll(ro);
        vxsum.update().split(re, ro, ri, 8).reorder(m, ri, ro).unroll(m).unroll(ri).unroll(ro);
        vxsum.update().compute_with(vdot.update(), ro);
        x_rows.compute_at(vdot, ro).store_in(MemoryType::Register).bound_extent(e, 4).bound_extent(l, 1)
            .bound_extent(c, 1).bound_extent(m, B).vectorize(e).unroll(m);
    }
};

}  // namespace

HALIDE_REGISTER_GENERATOR(W4Linear, w4_linear)
