// w4_linear on tensor cores (cuda_mma): y^T = W x^T by mma.sync m16n8k16, each group's sum in
// its own fp32 accumulators, scaled once per group (w4_linear_algorithm.h has the operator).
//
// A nibble pair becomes two elements of x's dtype by one AND-OR into M0's mantissa (bf16 128,
// fp16 1024: the pair's values M0 + u, exact), so the mma sums x (M0 + u) over a group; one more
// mma with A all ones gives the group's sum of x, X, and the group adds s (D - (M0 + z) X) =
// s sum x (u - z). The bias M0 rides in the fp32 sum: products are exact, and a group's sum
// carries about log2(M0 + 15) bits more magnitude than sum x (u - z) (8 of fp32's 24 for bf16, 11
// for fp16), still more than the output's 8 or 11 bits beyond its rounding.
#include "mma_by_definition.h"
#include "ptx_extern.h"
#include "w4_linear_algorithm.h"

namespace {

using namespace schedx::w4;
using schedx::ElemType;

class W4LinearMma : public Generator<W4LinearMma>, public Algorithm {
public:
    GeneratorParam<ElemType> x_type{"x_type", ElemType::bf16, schedx::elem_type_names()};      // bf16 | fp16
    GeneratorParam<ElemType> scale_type{"scale_type", ElemType::bf16, schedx::elem_type_names()};  // bf16 | fp16
    GeneratorParam<std::string> sched{"schedule", "cuda_mma"};  // cuda_mma
    GeneratorParam<int> rows_per_warp{"rows_per_warp", 16};   // rows n per warp, 16 per tile
    GeneratorParam<int> batch{"batch", 8};                    // rows m per warp, 8 per tile
    GeneratorParam<int> load_words{"load_words", 4};          // W words per row and lane per chunk
    GeneratorParam<int> split_k{"split_k", 1};                // warps sharing K by groups, summed in shared memory
    // The algorithm with Halide's default schedule: tests build it for the CPU, where the mma is
    // computed by its definition (tests/test_w4_linear_cpu.cpp). No variant sets it.
    GeneratorParam<bool> default_schedule{"default_schedule", false};

    void configure() {
        if (std::string(sched) != "cuda_mma") throw std::invalid_argument("unknown schedule " + std::string(sched));
        if (rows_per_warp % 16 != 0 || batch % 8 != 0 || !valid_mma_load_words(load_words) || split_k < 1) {
            throw std::invalid_argument("cuda_mma takes rows_per_warp a multiple of 16, batch of 8, load_words 1, 2 "
                                        "or 4, split_k >= 1");
        }
        declare_buffers(*this, x_type, scale_type, true);
    }

    void generate() {
        // THE ALGORITHM
        define_scales();
        define_mma_sums();
        define_y();

        // ESTIMATES
        estimate_buffers(2, 16);

        // THE SCHEDULE
        constrain_words();
        if (!default_schedule) schedule_cuda_mma();
    }

private:
    Var e{"e"}, l{"l"}, s{"s"}, h{"h"}, kv{"kv"}, c{"c"}, u{"u"}, nt{"nt"}, mt{"mt"}, gi{"gi"};
    Var no{"no"}, ni{"ni"}, nw{"nw"}, mo{"mo"}, mi{"mi"};
    // A lane's W and x words of a chunk; a group's D floats per tile (u = 0: sum x (M0 + u); u = 1:
    // the X sums); a part's scaled sums; the parts in shared memory.
    Func w_rows{"w_rows"}, x_rows{"x_rows"}, dfrag{"dfrag"}, part{"part"}, parts{"parts"};
    Func a_words{"a_words"}, b_words{"b_words"};  // a lane's A and B fragment words of an mma
    RDom rk, rg;

    Expr magic_pair;  // M0's bits in both halves, where a nibble's value lands in the low mantissa bits
    float magic() const { return mma_weight_offset(x_elem == ElemType::fp16); }

    // Nibbles i and i + 4 of a W word as two elements M0 + u (low half nibble i): one shift and
    // one LOP3.
    Expr nibble_pair(Expr word, int i) const {
        return ((word >> schedx::u32(4 * i)) & schedx::u32(0x000F000F)) | magic_pair;
    }

    // The mma of word kv, half q of chunk c: lane l = 4 g + t holds A's rows g and g + 8 and B's
    // column g, k slots 2t, 2t + 1 (a0, a1, b0) and 2t + 8, 2t + 9 (a2, a3, b1) (PTX ISA, m16n8k16
    // fragments). A sum does not depend on which k sits in which slot if A and B agree, so a
    // lane's 8 k of its W word kv (nibbles 0..7) fill its slots of two mmas: q takes nibbles
    // 2q, 2q + 4 into a0 (one LOP3 pair) and 2q + 1, 2q + 5 into a2, and B the same k of x, two
    // PRMTs of the word's 16-byte x vector (x words 4 kv + q and 4 kv + q + 2).
    void define_mma_sums() {
        const int LW = load_words, S = split_k;
        // As a value ptxas cannot fold (W's row pitch is at least K / 8 > 0): with both constants
        // immediate, the AND and the OR took a LOP3 each.
        magic_pair = select(w->dim(1).stride() > 0, schedx::u32(x_elem == ElemType::fp16 ? 0x64006400u : 0x43004300u),
                            schedx::u32(0));
        // Lane l's vector in chunk c (mma_chunk_elems: the quad's four lanes, LW words each).
        Expr vec = c * 4 + l % 4;
        w_rows(kv, h, l, c, nt) = (*w)(vec * LW + kv, w_row(nt * 16 + l / 4 + 8 * h));
        x_rows(kv, l, c, mt) = (*x)(vec * 4 * LW + kv, x_row(mt * 8 + l / 4));

        // A group is chunks_per_group chunks (the runtime takes group_size >= 32 LW); part s of S
        // takes the groups gi = j S + s, a warp each. Rounds past the last group add zeros.
        Expr chunks_per_group = *group_size / int(mma_chunk_elems(LW));
        Expr groups = scales->dim(0).extent();
        rk = RDom({{0, LW}, {0, 2}, {0, chunks_per_group}}, "rk");
        Expr chunk = gi * chunks_per_group + rk.z;
        // Word i of lane l's A fragment for W word kv, half q of chunk c, tile nt: a0 / a1 (rows g, g + 8)
        // take nibbles 2q and 2q + 4, a2 / a3 nibbles 2q + 1 and 2q + 5; the X sums' (u = 1) are ones.
        Var i("i"), q("q");
        const Expr ones = schedx::u32(x_elem == ElemType::fp16 ? 0x3C003C00u : 0x3F803F80u);
        Expr word = w_rows(kv, i % 2, l, c, nt);
        Expr pair = select(q == 0, select(i < 2, nibble_pair(word, 0), nibble_pair(word, 1)),
                           select(i < 2, nibble_pair(word, 2), nibble_pair(word, 3)));
        a_words(i, l, kv, q, c, u, nt) = select(u == 1, ones, pair);
        // Word i of its B fragment: the same k of x, low halves (i = 0) or high halves of x words
        // 4 kv + q and 4 kv + q + 2.
        Expr xa = x_rows(4 * kv + q, l, c, mt), xb = x_rows(4 * kv + q + 2, l, c, mt);
        Expr sel = select(i == 0, schedx::u32(0x5410), schedx::u32(0x7632));
        b_words(i, l, kv, q, c, mt) = get_target().has_gpu_feature() ? schedx::prmt(xa, xb, sel) : schedx::prmt_by_shifts(xa, xb, sel);
        auto a = [&](int word_index, Expr lane) { return a_words(word_index, lane, rk.x, rk.y, chunk, u, nt); };
        auto b = [&](int word_index, Expr lane) { return b_words(word_index, lane, rk.x, rk.y, chunk, mt); };
        // A fifth float, never read, sums the old four outside any call (as in
        // w8_linear_mma_generator.cpp: Halide 21's tuple split orders an update's stores by its
        // values' reads outside call arguments only).
        dfrag(l, gi, u, nt, mt) = Tuple(0.0f, 0.0f, 0.0f, 0.0f, 0.0f);
        Tuple old = Tuple(dfrag(l, gi, u, nt, mt));
        const std::vector<Expr> c_in = {old[0], old[1], old[2], old[3]};
        std::vector<Expr> sum;
        if (get_target().has_gpu_feature()) {
            sum = schedx::ptx_mma_m16n8k16({a(0, l), a(1, l), a(2, l), a(3, l)}, {b(0, l), b(1, l)}, c_in,
                                           x_elem == ElemType::fp16);
        } else {
            sum = schedx::mma_m16n8k16_by_definition(a, b, c_in, l, [&](Expr bits) { return decode(x_elem, bits); });
        }
        sum.push_back(old[0] + old[1] + old[2] + old[3]);
        dfrag(l, gi, u, nt, mt) = Tuple(sum);

        // D's float e of lane l is row l / 4 + 8 (e / 2), column 2 (l % 4) + e % 2 of its tile.
        rg = RDom(0, (groups + S - 1) / S, "rg");
        Expr group = rg * S + s;
        Expr gc = min(group, groups - 1);
        auto d = [&](int sums) {
            Tuple t = Tuple(dfrag(l, gc, sums, nt, mt));
            return mux(e, {t[0], t[1], t[2], t[3]});
        };
        Expr row = nt * 16 + l / 4 + 8 * (e / 2);
        Expr sc = sf(gc, row);
        Expr term = sc * d(0) - sc * (magic() + zf(gc, row)) * d(1);
        part(e, l, s, nt, mt) = 0.0f;
        part(e, l, s, nt, mt) += select(group < groups, term, 0.0f);

        auto out_of = [&](Expr p) {
            return parts(m % 2 + 2 * ((n / 8) % 2), (n % 8) * 4 + (m / 2) % 4, p, n / 16, m / 8);
        };
        // The parts meet in shared memory (one part too: a warp's floats reach y's lanes there).
        parts(e, l, s, nt, mt) = part(e, l, s, nt, mt);
        RDom rs(0, S, "rs");
        acc(n, m) = 0.0f;
        acc(n, m) += out_of(rs);
    }

    // Buffers from 0, K in whole chunks, rows 16-byte vectors apart, so that Halide proves
    // each vector load aligned.
    void constrain_words() {
        const int LW = load_words;
        x->dim(0).set_min(0).set_extent((x->dim(0).extent() / (16 * LW)) * (16 * LW));
        x->dim(1).set_min(0).set_stride((x->dim(1).stride() / 4) * 4);
        w->dim(0).set_min(0).set_extent(x->dim(0).extent() / 4);
        w->dim(1).set_min(0).set_stride((w->dim(1).stride() / 4) * 4);
        scales->dim(0).set_min(0);
    }

    // A warp owns rows_per_warp / 16 tiles of 16 rows of W and batch / 8 tiles of 8 rows of x;
    // per chunk each lane loads load_words W words of each of its two rows per tile (one
    // vector) and 4 load_words x words per row tile, and issues 2 load_words mmas per pair of
    // tiles, plus the X tile's. A group's D floats stay in registers and are scaled into the
    // part's sums once per group; split_k warps per block take every split_k-th group, their
    // sums met in shared memory. H100, N = K = 8192, dirty L2: b8_r16w4_splitk4 31.8 us at M = 4
    // (64% of a read; b4_r4 39.2), b16 37.6 at M = 16, b32_r16w1_splitk8 60.3 at M = 32.
    void schedule_cuda_mma() {
        const int NT = rows_per_warp / 16, MT = batch / 8, S = split_k;
        y->dim(0).set_min(0);
        y->dim(1).set_min(0);
        Var nh("nh"), ng("ng"), mq("mq"), ml("ml"), ntl("ntl"), mtl("mtl"), lane("lane"), kw("kw");
        // Output (n, m) of a warp sits in lane 4 ng + mq, float 2 nh + ml of tiles (ntl, mtl).
        y->split(n, no, ni, 16 * NT, TailStrategy::GuardWithIf)
            .split(ni, ntl, ni, 16)
            .split(ni, nh, ng, 8)
            .split(m, mo, mi, 8 * MT, TailStrategy::GuardWithIf)
            .split(mi, mtl, mi, 8)
            .split(mi, mq, ml, 2)
            .fuse(mq, ng, lane)
            .reorder(ml, nh, mtl, ntl, lane, no, mo)
            .unroll(ml)
            .unroll(nh)
            .unroll(mtl)
            .unroll(ntl)
            .gpu_blocks(no, mo)
            .gpu_threads(lane);
        parts.bound(e, 0, 4)
            .bound(l, 0, 32)
            .bound(s, 0, S)
            .bound_extent(nt, NT)
            .bound_extent(mt, MT)
            .reorder(e, nt, mt, l, s)
            .unroll(e)
            .unroll(nt)
            .unroll(mt);
        parts.compute_at(*y, no).store_in(MemoryType::GPUShared).gpu_threads(l, s);
        acc.compute_at(*y, ml).update().unroll(acc.rvars()[0]);
        part.compute_at(parts, s)
            .bound(e, 0, 4)
            .bound(l, 0, 32)
            .bound_extent(nt, NT)
            .bound_extent(mt, MT)
            .reorder(e, nt, mt, l, s)
            .unroll(e)
            .unroll(nt)
            .unroll(mt)
            .gpu_lanes(l);
        part.update().reorder(e, nt, mt, l, rg, s).unroll(e).unroll(nt).unroll(mt).gpu_lanes(l);
        // u from 0, so that the X sums' ones are a constant in the unrolled loop (with a runtime
        // start Halide kept select(u == 1, ones, pair) as 32 SELs per chunk).
        dfrag.compute_at(part, rg)
            .bound(l, 0, 32)
            .bound(u, 0, 2)
            .bound_extent(nt, NT)
            .bound_extent(mt, MT)
            .unroll(u)
            .unroll(nt)
            .unroll(mt)
            .gpu_lanes(l);
        dfrag.update()
            .reorder(mt, u, nt, rk.x, rk.y, rk.z, l)
            .unroll(mt)
            .unroll(u)
            .unroll(nt)
            .unroll(rk.y)
            .unroll(rk.x)
            .gpu_lanes(l);
        w_rows.compute_at(dfrag, rk.z)
            .store_in(MemoryType::Register)
            .bound_extent(kv, load_words)
            .bound_extent(h, 2)
            .bound_extent(l, 1)
            .bound_extent(c, 1)
            .bound_extent(nt, NT)
            .vectorize(kv)
            .unroll(h)
            .unroll(nt);
        x_rows.compute_at(dfrag, rk.z)
            .store_in(MemoryType::Register)
            .bound_extent(kv, 4 * load_words)
            .bound_extent(l, 1)
            .bound_extent(c, 1)
            .bound_extent(mt, MT)
            .split(kv, kv, kw, 4)
            .vectorize(kw)
            .unroll(kv)
            .unroll(mt);
    }
};

}  // namespace

HALIDE_REGISTER_GENERATOR(W4LinearMma, w4_linear_mma)
