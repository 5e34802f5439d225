// Weight-only int8 linear (LLM inference):
//   y[m][n] = (sum_k x[m][k] * float(W[n][k])) * scales[n] (+ bias[n])
// x is bf16 or fp16 [M, K], W int8 [N, K], scales and bias bf16 or fp32 [N], y [M, N] in
// x's dtype, rounded to nearest-even once from the fp32 accumulator. K is the contiguous
// dimension of x and W (called k here), n the contiguous one of y. 16-bit formats travel
// as uint16 bits (Halide's bf16 crashes the CUDA backend, ../shared/HALIDE.md).
//
// The pieces of that algorithm the w8_linear generators share: one generator per kernel
// family (w8_linear_generator.cpp: the dot product for the CPU and any CUDA shape;
// w8_linear_lanes_generator.cpp: a warp's lanes along K; w8_linear_mma_generator.cpp: tensor
// cores; w8_linear_stages_generator.cpp: the stages around cuBLAS), each taking from here the
// operator's types, W's int8 conversion, the lane layout and the output y.
#pragma once

#include <string>
#include <vector>

#include "Halide.h"
#include "numerics.h"
#include "ptx_extern.h"
#include "w8_linear_layout.h"

namespace schedx::w8 {

using namespace Halide;

constexpr Layout kLayout{};

// The operator's buffers and the output stage every generator that ends in y shares. A
// generator derives from Generator<itself> and from this, sets the types in configure() and
// adds its buffers there.
class Algorithm {
protected:
    ElemType x_elem = ElemType::bf16, scale_elem = ElemType::bf16;
    Var k{"k"}, n{"n"}, m{"m"};
    Var kv{"kv"}, l{"l"}, c{"c"}, s{"s"};  // word layouts: element (or word) in a lane's run, lane, group, part
    Var no{"no"}, ni{"ni"}, nw{"nw"}, nl{"nl"}, mo{"mo"}, mi{"mi"};
    GeneratorInput<Buffer<>> *x = nullptr, *w = nullptr, *scales = nullptr, *bias = nullptr, *acc_in = nullptr;
    GeneratorOutput<Buffer<>> *y = nullptr;
    Func acc{"acc"};
    // Word schedules stage these per lane: rows already clamped, so a tile of R columns or
    // B rows is a constant-size register array even at the edges (a guarded row count
    // put the staging arrays in local memory).
    Func w_rows{"w_rows"}, x_rows{"x_rows"};
    Layout layout;  // the word layouts' (w8_linear_layout.h), which the runtime reads too
    Expr w_magic;   // int8_of_word_to_float's magic (undefined off CUDA)

    void set_types(ElemType x_type, ElemType scale_type) {
        if (x_type == ElemType::fp32) throw std::invalid_argument("x_type must be bf16 or fp16");
        if (scale_type == ElemType::fp16) throw std::invalid_argument("scale_type must be bf16 or fp32");
        x_elem = x_type;
        scale_elem = scale_type;
    }

    Type scale_t() const { return scale_elem == ElemType::fp32 ? Float(32) : UInt(16); }

    Expr scale_value(Expr e) const {
        return scale_elem == ElemType::fp32 ? e : schedx::decode_to_float(e, ElemType::bf16);
    }

    // 2^23's bits for int8_of_word_to_float's PRMT, as a value the compiler cannot fold (W's
    // row pitch is at least K > 0): with a constant there, ptxas put the byte selector in a
    // register and re-loaded it before every PRMT. Left undefined on the CPU and for the
    // autoschedulers, which want an estimate for every parameter (a stride has none) and
    // cannot cost the intrinsic.
    void define_magic(const Target &target, bool autoscheduled) {
        if (target.has_feature(Target::CUDA) && !autoscheduled) {
            w_magic = select(w->dim(1).stride() > 0, schedx::u32(0x4B000000), schedx::u32(0));
        }
    }

    // Columns beyond N (a tile's padding) read column N-1 instead of out of bounds; their
    // results are never stored. Rows beyond M alike.
    Expr w_column() const { return clamp(n, 0, w->dim(1).extent() - 1); }
    Expr x_row() const { return clamp(m, 0, x->dim(1).extent() - 1); }

    // y from the fp32 sums acc: scaled, biased, rounded once to x's dtype.
    void define_y() {
        Expr nc = clamp(n, 0, scales->dim(0).extent() - 1);
        Expr out = acc(n, m) * scale_value((*scales)(nc));
        if (bias) out += scale_value((*bias)(nc));
        (*y)(n, m) = cast<uint16_t>(schedx::float_to_half_bits(out, x_elem));
    }

    void estimate_scales_and_y(int y_rows) {
        scales->set_estimates({{0, 8192}});
        if (bias) bias->set_estimates({{0, 8192}});
        y->set_estimates({{0, 8192}, {0, y_rows}});
    }

    // K elements per step of the reduction, and K in those steps (word layouts take K in
    // whole steps, asserted by constrain_words; saying so in the extent lets their splits of
    // the reduction be exact).
    Expr whole_steps(Expr kk) const { return (kk / layout.k_step()) * layout.k_step(); }

    // Word-typed buffers start at 0 with rows a vector apart (16 bytes, or W's vector_words
    // and x's twice that), so that Halide can prove the vectors aligned (the 128-bit access
    // rule); K is whole granules (k_granule).
    void constrain_words() {
        const int xa = layout.x_vector_words(), wa = layout.w_vector_words(), granule = layout.k_granule();
        x->dim(0).set_min(0).set_extent((x->dim(0).extent() / (granule / 2)) * (granule / 2));
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
};

// The lane layout (cuda_gemv, cuda_smallbatch, cuda_splitk): a warp's 32 lanes walk K, each
// summing its own elements of R columns and B rows in registers, then five shuffle halvings
// add the lanes. The generator sets `layout` and these flags in configure().
class LaneAlgorithm : public Algorithm {
protected:
    bool coalesced = false;    // a lane's words of a step as vectors 32 vectors apart
    bool evict_first = false;  // W's loads carry an evict-first L2 policy
    bool element_io = false;   // x and W as elements (any K, pitch and alignment)
    Func wf_lane{"wf_lane"}, xf_lane{"xf_lane"};  // a lane's W and x elements as floats
    Func lane_sum{"lane_sum"};                     // a lane's partial sum of each output (and part)
    Func part{"part"};                             // split-K: each part's sum of each output
    std::vector<Func> lane_tree;                   // the five shuffle-and-add halvings across lanes
    RDom r, rt;                                    // rt: k_tail's vectors past the whole steps

    // Elements of one lane's contiguous run in a group of 32 runs. Coalesced, one vector (a
    // lane's load_words are load_words / vector_words runs, 128 * vector_words bytes apart);
    // else all 4 * load_words of a step in one run.
    int lane_run() const { return coalesced ? 4 * layout.vector_words : 4 * layout.load_words; }

    // element_io: element kv of lane l's run in group c, the runs' elements interleaved lane
    // by lane (a warp's load j of a step reads elements 32 j .. 32 j + 31).
    Expr element_k(Expr kv, Expr l, Expr c) const { return (c * lane_run() + kv) * 32 + l; }

    // W's and x's elements of lane l's runs in group c, as floats.
    void define_lane_elements() {
        Expr nc = w_column(), mc = x_row();
        if (element_io) {
            w_rows(kv, l, c, n) = cast<uint32_t>(reinterpret<uint8_t>((*w)(element_k(kv, l, c), nc)));
            wf_lane(kv, l, c, n) = schedx::int8_of_word_to_float(w_rows(kv, l, c, n), 0, w_magic);
            x_rows(kv, l, c, m) = cast<uint32_t>((*x)(element_k(kv, l, c), mc));
            xf_lane(kv, l, c, m) = schedx::decode_to_float(x_rows(kv, l, c, m), x_elem);
            return;
        }
        // Element kv of lane l's lane_run() in group c, k = (c*32 + l)*lane_run() + kv:
        // indexed by (kv, l, c), a lane's words of one step are a dense box.
        w_rows(kv, l, c, n) = (*w)((c * 32 + l) * (lane_run() / 4) + kv, nc);
        // The mark goes on the staged words' uses: inside w_rows' vectorized load Halide
        // would scalarize the extern call and the load with it.
        Expr w_word = w_rows(kv / 4, l, c, n);
        if (evict_first) w_word = schedx::ptx_evict_first(w_word);
        wf_lane(kv, l, c, n) = schedx::int8_of_word_to_float(w_word, kv % 4, w_magic);
        // As w_rows: the x words that meet a lane's W words.
        x_rows(kv, l, c, m) = (*x)((c * 32 + l) * (lane_run() / 2) + kv, mc);
        xf_lane(kv, l, c, m) = schedx::decode_to_float(
            (x_rows(kv / 2, l, c, m) >> (cast<uint32_t>(kv % 2) * 16)) & schedx::u32(0xFFFF), x_elem);
    }

    // Each lane sums its own elements (over run and group: its index is a loop variable,
    // not (k / run) % 32, whose bounds Halide would take as all 32 lanes), then five
    // halvings add lane l + 16, 8, 4, 2, 1 to lane l (one shuffle each; lanes past the live
    // half add lane 31, unused; lane 0 of the last holds the sum). Rotations ((l + s) % 32)
    // cost two shuffles and a select, lanes fewer than 32 broke the striping; the rfactor'd
    // form summed the 32 lanes one shuffle at a time, a third of the M = 8 kernel's
    // instructions. Split-K gives part s of S the groups c = j * S + s (one warp each, the S
    // parts then summed); elsewhere S = 1.
    void define_lane_sums() {
        const int S = layout.split_k;
        Expr kk = whole_steps(w->dim(0).extent() * (element_io ? 1 : 4));
        r = RDom({{0, lane_run()}, {0, kk / (32 * lane_run() * S)}}, "r");
        lane_sum(l, s, n, m) = 0.0f;
        lane_sum(l, s, n, m) += xf_lane(r.x, l, r.y * S + s, m) * wf_lane(r.x, l, r.y * S + s, n);
        if (layout.k_tail) define_tail_sum(kk);
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
    }

    // k_tail: K from kk (the whole steps) on, in vectors of 4 * vector_words elements, lane l
    // taking vectors l, l + 32, ...; a lane past the last vector re-reads it (every load in
    // bounds, no branch in the warp) and adds 0.
    // element_io: vectors of one element, loaded as elements.
    void define_tail_sum(Expr kk) {
        const int VE = element_io ? 1 : 4 * layout.vector_words;
        Expr kx = w->dim(0).extent() * (element_io ? 1 : 4);
        Expr vectors = (kx - kk) / VE;
        rt = RDom({{0, VE}, {0, (vectors + 31) / 32}}, "rt");
        Expr vec = rt.y * 32 + l;
        Expr kel = min(kk + vec * VE, kx - VE) + rt.x;
        Expr mc = x_row(), nc = w_column();
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
        Expr product = schedx::decode_to_float(xbits16, x_elem) * schedx::int8_of_word_to_float(w_word, byte, w_magic);
        lane_sum(l, s, n, m) += select(vec < vectors, product, 0.0f);
    }

    // A warp's lane layout, computed at `at`'s loop `warp`: each lane's R x B sums as
    // registers (the tile is whole even at the edges of y: the reads are clamped), then the
    // halvings. Per step a lane takes `groups` runs of lane_run() elements: load_words /
    // vector_words runs 32 runs apart (coalesced) or one, with its R x load_words W words and B x
    // 2 * load_words x words loaded once as vectors.
    void schedule_lanes(Func at, Var warp, int R, int B) {
        const int groups = coalesced ? layout.load_words / layout.vector_words : 1;
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
        if (layout.k_tail) schedule_tail_sum();
        for (Func &sum : lane_tree) per_lane(sum);
        if (element_io) {
            stage_lane_words(w_rows, ro, lane_run(), 1, n, R, 1);
            stage_lane_words(x_rows, ro, lane_run(), 1, m, B, 1);
        } else {
            stage_lane_words(w_rows, ro, lane_run() / 4, groups, n, R, layout.vector_words);
            stage_lane_words(x_rows, ro, lane_run() / 2, groups, m, B, layout.x_vector_words());
        }
    }

    void schedule_tail_sum() {
        if (element_io) {
            lane_sum.update(1).reorder(m, n, rt.x, rt.y, l).unroll(m).unroll(n).unroll(rt.x).gpu_lanes(l);
            return;
        }
        // One W word (4 elements) per iteration: the whole vector unrolled took
        // b8_r8w4_coalesced_ktail from 4264 to 6936 SASS instructions.
        RVar wo("wo"), wi("wi");
        lane_sum.update(1).split(rt.x, wo, wi, 4).reorder(m, n, wi, wo, rt.y, l).unroll(m).unroll(n).unroll(wi).gpu_lanes(l);
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
};

}  // namespace schedx::w8
