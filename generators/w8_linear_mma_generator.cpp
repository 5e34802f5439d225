// w8_linear on tensor cores (cuda_mma): y^T = W x^T by mma.sync m16n8k16, W converted to
// x's dtype in registers; the shared pieces are in w8_linear_algorithm.h.
#include "w8_linear_algorithm.h"

namespace {

using namespace schedx::w8;
using schedx::ElemType;

enum class Mma { cuda_mma };

class W8LinearMma : public Generator<W8LinearMma>, public Algorithm {
public:
    GeneratorParam<ElemType> x_type{"x_type", ElemType::bf16, schedx::elem_type_names()};      // bf16 | fp16
    GeneratorParam<ElemType> scale_type{"scale_type", ElemType::bf16, schedx::elem_type_names()};  // bf16 | fp32
    GeneratorParam<bool> with_bias{"with_bias", false};
    GeneratorParam<Mma> sched{"schedule", Mma::cuda_mma, {{"cuda_mma", Mma::cuda_mma}}};
    // Defaults of the layout's parameters: schedx::w8::Layout's (w8_linear_layout.h), which the runtime reads.
    GeneratorParam<int> rows_per_warp{"rows_per_warp", kLayout.rows_per_warp};  // columns n per warp, 16 per tile
    GeneratorParam<int> load_words{"load_words", kLayout.load_words};  // W words per row per K chunk
    GeneratorParam<int> warps{"warps", 4};  // warps per block along n (1 with split_k > 1)
    GeneratorParam<int> batch{"batch", kLayout.batch};  // rows m per warp, 8 per tile
    GeneratorParam<int> split_k{"split_k", kLayout.split_k};  // warps sharing K, summed in shared memory
    // K in whole chunks (16 * load_words) instead of split_k chunks; the warps of the last
    // round whose chunk is past K add zeros.
    GeneratorParam<bool> k_tail{"k_tail", kLayout.k_tail};

    void configure() {
        set_types(x_type, scale_type);
        layout = {false, true, split_k, load_words, kLayout.vector_words, k_tail, rows_per_warp, batch};
        if (rows_per_warp % 16 != 0 || batch % 8 != 0 || (load_words % 2 != 0 && load_words != 1)) {
            throw std::invalid_argument("cuda_mma takes rows_per_warp a multiple of 16, batch of 8, load_words 1 or of 2");
        }
        if (split_k > 1 && warps != 1) throw std::invalid_argument("cuda_mma with split_k > 1 takes warps = 1");
        x = add_input<Buffer<>>("x", UInt(32), 2);
        w = add_input<Buffer<>>("w", UInt(32), 2);
        scales = add_input<Buffer<>>("scales", scale_t(), 1);
        if (with_bias) bias = add_input<Buffer<>>("bias", scale_t(), 1);
        y = add_output<Buffer<>>("y", UInt(16), 2);
    }

    void generate() {
        // THE ALGORITHM
        define_magic(get_target(), using_autoscheduler());
        // Word kv of lane l's run in K chunk c, for the A fragment's rows l / 4 (h = 0) and
        // l / 4 + 8 (h = 1) of 16-row tile nt, and the x words of B's column l / 4 of 8-row
        // tile mt (define_mma_sum).
        const int LW = load_words;
        Expr w_row = clamp(nt * 16 + l / 4 + 8 * h, 0, w->dim(1).extent() - 1);
        w_rows(kv, h, l, c, nt) = (*w)(mma_vector(c, l) * LW + kv, w_row);
        Expr x_row = clamp(mt * 8 + l / 4, 0, x->dim(1).extent() - 1);
        x_rows(kv, l, c, mt) = (*x)(mma_vector(c, l) * 2 * LW + kv, x_row);
        // k_tail: whole chunks (constrain_words).
        define_mma_sum(k_tail ? w->dim(0).extent() * 4 : whole_steps(w->dim(0).extent() * 4));
        define_y();

        // ESTIMATES
        x->set_estimates({{0, 8192 / 2}, {0, 16}});
        w->set_estimates({{0, 8192 / 4}, {0, 8192}});
        estimate_scales_and_y(16);

        // THE SCHEDULE
        constrain_words();
        schedule_cuda_mma();
    }

private:
    Var h{"h"}, e{"e"}, nt{"nt"}, mt{"mt"};  // A's row half, D's float, 16-row tile of n, 8-row tile of m
    Func mma_frag{"mma_frag"};  // a lane's four D floats of each tile (+ define_mma_sum's fifth)
    Func mma_out{"mma_out"};    // ... indexed by float e
    RDom r;

    // Bytes i, i + 1 of a W word as two elements of x's dtype, byte i in the low half.
    Expr w_pair(Expr word, int i) const {
        Expr lo = schedx::int8_of_word_to_float(word, i, w_magic);
        Expr hi = schedx::int8_of_word_to_float(word, i + 1, w_magic);
        if (x_elem == ElemType::bf16) {  // the floats' upper halves, one PRMT
            return schedx::prmt(reinterpret<uint32_t>(lo), reinterpret<uint32_t>(hi), schedx::u32(0x7632));
        }
        return schedx::small_int_to_half_bits(lo, x_elem) | (schedx::small_int_to_half_bits(hi, x_elem) << 16);
    }

    // The index of lane l's vector (load_words W words, 2 load_words x words) in K chunk c;
    // with vector_tail (k_tail and W vectors under 16 bytes, K = 4100 at load_words 1: each
    // lane's vector of the last chunk live or zero) clamped to the last whole vector, so
    // loads stay in the row.
    Expr mma_vector(Expr c, Expr l) {
        Expr v = c * 4 + l % 4;
        return layout.vector_tail() ? min(v, w->dim(0).extent() / int(load_words) - 1) : v;
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
        const int LW = load_words, S = split_k;
        // Split-K: part s of S takes the chunks c = j * S + s (a warp each, summed in y).
        // k_tail: rounds up to the last chunk; a warp past it loads that chunk and multiplies
        // zeros (both operands: 0 * inf would be NaN).
        Expr chunks = layout.vector_tail() ? (kk + 16 * LW - 1) / (16 * LW) : kk / (16 * LW);
        r = RDom({{0, LW}, {0, k_tail ? (chunks + S - 1) / S : chunks / S}}, "r");
        Expr c = r.y * S + s, valid = c < chunks;
        if (layout.vector_tail()) valid = c * 4 + l % 4 < kk / (4 * LW);  // this lane's vector in K
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
            schedx::ptx_mma_m16n8k16(a, b, {old[0], old[1], old[2], old[3]}, x_elem == ElemType::fp16);
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
        const int NT = rows_per_warp / 16, MT = batch / 8, S = split_k, WB = warps, LW = load_words;
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
};

}  // namespace

HALIDE_REGISTER_GENERATOR(W8LinearMma, w8_linear_mma)
