// Fused fp8 cast + transpose:
//   rows = clamp(x * scale, -FMAX, FMAX).to(fp8)   row-major [M, K]  (scale_by=divide: x / scale)
//   cols = the same values column-major            (f.t().contiguous().t())
//   amax = max |x| (NaN if any x is NaN), scale_inv = 1 / scale
// x is [M, K] with a leading dimension; K is the contiguous dimension, called x here,
// M is called y. The fp8 format is a runtime parameter (0 = e4m3fn, 1 = e5m2).
#include "Halide.h"
#include "cast_transpose_layout.h"
#include "cuda_atomics.h"
#include "numerics.h"
#include "ptx_extern.h"

namespace {

using namespace Halide;
using schedx::ElemType;

enum class Outputs { both, rows, cols };
enum class ScaleBy { multiply, divide };

class CastTransposeFp8 : public Generator<CastTransposeFp8> {
public:
    GeneratorParam<ElemType> in_type{"in_type", ElemType::bf16, schedx::elem_type_names()};
    GeneratorParam<Outputs> outputs{"outputs", Outputs::both,
                                    {{"both", Outputs::both}, {"rows", Outputs::rows}, {"cols", Outputs::cols}}};
    GeneratorParam<bool> with_amax{"with_amax", false};
    // multiply: x * scale; divide: x / scale rounded once as IEEE fp32 division, as eager
    // PyTorch's `x / s` (x * (1 / s) differs from it in the last bit, and sometimes the fp8 code).
    GeneratorParam<ScaleBy> scale_by{"scale_by", ScaleBy::multiply,
                                     {{"multiply", ScaleBy::multiply}, {"divide", ScaleBy::divide}}};
    // any: format chosen by the fp8_format argument; e4m3 / e5m2: fixed, the encoder's
    // selects fold away (the tiled kernels are issue-bound, so this matters).
    GeneratorParam<std::string> fp8{"fp8", "any"};
    // cpu | cuda_general | cuda_tiled (whole tiles) | cuda_skinny (M or K at most 63) | auto (autoscheduler)
    GeneratorParam<std::string> sched{"schedule", "cpu"};
    // cuda_skinny: the long dimension, one thread per element of it: k (M <= 63) or m (K <= 63)
    GeneratorParam<std::string> long_dim{"long_dim", "k"};
    // cuda_tiled: word (32-bit I/O, 16-byte aligned rows) | element (any row and pointer the
    // element size allows: the element algorithm, as cuda_general and cpu compute it)
    GeneratorParam<std::string> io{"io", "word"};
    // cuda_tiled with io=word: element stores cols one byte per element, so its rows (M bytes
    // long) need no alignment: a ragged M with an aligned K (token counts), input and rows in words.
    GeneratorParam<std::string> cols_io{"cols_io", "word"};
    GeneratorParam<int> tile{"tile", schedx::cast_layout::kTile};  // cuda_tiled: tile width along K, in elements
    GeneratorParam<int> tile_rows{"tile_rows", 0};     // cuda_tiled: tile height along M (0: tile, square)
    GeneratorParam<int> rows_per_thread{"rows_per_thread", 4};
    GeneratorParam<int> load_words{"load_words", 4};   // cuda_tiled: 32-bit words per input load
    GeneratorParam<int> pad_words{"pad_words", 0};   // cuda_tiled: shared-memory row padding
    // cuda_tiled: integer (arithmetic, any GPU) | ptx (cvt.rn.satfinite pairs, sm_89, by
    // the runtime's PTX rewrite; needs a fixed fp8). H200 8192^2: t128x64r8w4 ptx 72.3 us
    // against the integer best 73.3 (ptx_rewrite_2026-12-04_h200_165497c.md).
    GeneratorParam<std::string> encoder{"encoder", "integer"};
    // The algorithm of `schedule` with its buffer constraints but Halide's default schedule:
    // tests build the word tiles for the CPU (tests/test_cast_tiles_cpu.cpp). No variant sets it.
    GeneratorParam<bool> default_schedule{"default_schedule", false};

    Input<Buffer<float, 0>> scale{"scale"};
    Input<int> fp8_format{"fp8_format"};

    void configure() {
        word_io = sched.value() == "cuda_tiled" && io.value() == "word";
        cols_bytes = word_io && cols_io.value() == "element";
        if (cols_io.value() != "word" && !cols_bytes) throw std::invalid_argument("cols_io=element takes cuda_tiled io=word");
        // Its cols stage widens the block to 32 lanes in x, so the amax stages run on 8 of each
        // warp's lanes, outside their full-mask REDUX (the kernel stopped on the GPU).
        if (cols_bytes && with_amax) throw std::invalid_argument("cols_io=element takes no fused amax");
        // Its scale_inv output would be 1 / scale; a divide caller has no use for it.
        if (scale_by == ScaleBy::divide && with_amax) throw std::invalid_argument("scale_by=divide takes no amax");
        if (sched.value() == "cuda_tiled" && io.value() != "word") {
            if (io.value() != "element") throw std::invalid_argument("unknown io " + io.value());
            if (encoder.value() != "integer") throw std::invalid_argument("io=element encodes with the integer encoder");
        }
        Type t = in_type == ElemType::fp32 ? Float(32) : (word_io ? UInt(32) : UInt(16));
        input = add_input<Buffer<>>("input", t, 2);
        const Type out_t = word_io ? UInt(32) : UInt(8);
        if (outputs == Outputs::both || outputs == Outputs::rows) rows = add_output<Buffer<>>("rows", out_t, 2);
        if (outputs == Outputs::both || outputs == Outputs::cols) cols = add_output<Buffer<>>("cols", cols_bytes ? UInt(8) : out_t, 2);
        if (with_amax && sched.value() == "cuda_tiled") {
            // amax_address: the device address of the caller's amax (float bits), which the
            // runtime zeroes on the stream just before the kernel. Each tile adds its maximum
            // there by an atomic that no thread waits for, and the first tile writes scale_inv
            // at scale_inv_address by one more (no stage of its own: one barrier less per
            // block); tile_sink, one word per tile (a workspace the runtime keeps per
            // stream), is what those atomics are computed for.
            amax_address = add_input<uint64_t>("amax_address");
            scale_inv_address = add_input<uint64_t>("scale_inv_address");
            tile_sink = add_output<Buffer<uint32_t, 2>>("tile_sink");
        } else if (with_amax) {
            amax = add_output<Buffer<uint32_t, 0>>("amax");  // float bits
            scale_inv = add_output<Buffer<float, 0>>("scale_inv");
        }
    }

    void generate() {
        // THE ALGORITHM
        define_codes();
        if (word_io) {
            define_words();
        } else {
            if (rows) (*rows)(x, y) = f8_code(x, y);
            if (cols) (*cols)(y, x) = f8_code(x, y);
        }
        // Non-negative floats order like their bits and NaN bits exceed inf's, so an integer
        // max of |x|'s bits is max |x| with NaN propagated.
        if (with_amax && amax_address) {
            define_fused_amax();
        } else if (with_amax) {
            define_amax_pass();
        }

        // ESTIMATES
        set_all_estimates();

        // THE SCHEDULE
        schedule();
    }

private:
    // Each element's bits and fp8 code (f8; with the element tiles' fused amax, beside its |x|).
    void define_codes() {
        xbits(x, y) = element_bits(x, y);
        Expr value = schedx::decode_to_float(xbits(x, y), in_type);
        Expr is_e5m2 = fp8.value() == "any" ? (fp8_format != 0) : Expr(fp8.value() == "e5m2");
        Expr code = schedx::encode_fp8(scaled(value), is_e5m2);
        if (with_amax && sched.value() == "cuda_tiled" && !word_io) {
            // Element tiles with the fused amax: each element's |x| in the input format's bits
            // beside its code, which the word tiles keep per word (below).
            f8(x, y) = Tuple(code, stored_abs_bits(abs_input_bits(xbits(x, y))));
        } else {
            f8(x, y) = code;
        }
    }

    // word_io: rows and cols as words of four codes.
    void define_words() {
        // Four fp8 codes per 32-bit word, lowest address in the low byte.
        Expr packed = cast<uint32_t>(f8(4 * x, y)) | (cast<uint32_t>(f8(4 * x + 1, y)) << 8) |
                      (cast<uint32_t>(f8(4 * x + 2, y)) << 16) | (cast<uint32_t>(f8(4 * x + 3, y)) << 24);
        if (encoder.value() == "ptx") {
            if (fp8.value() == "any") throw std::invalid_argument("encoder=ptx needs fp8=e4m3 or e5m2");
            auto element = [&](int j) { return scaled(schedx::decode_to_float(xbits(4 * x + j, y), in_type)); };
            const bool e5m2 = fp8.value() == "e5m2";
            packed = cast<uint32_t>(schedx::ptx_cvt_fp8x2(element(0), element(1), e5m2)) |
                     (cast<uint32_t>(schedx::ptx_cvt_fp8x2(element(2), element(3), e5m2)) << 16);
        }
        if (with_amax) {
            // The fused amax takes max |x| of the word's four elements from the values
            // the cast already holds in registers (a second read of x from memory cost
            // 74 MB of extra DRAM traffic at 8192^2: L1 hit rate under 1%), in the input
            // format's own bits with the sign cleared (they order like |x|; decoded per
            // tile): 16 bits per word for bf16/fp16, where 32 cost shared memory and
            // occupancy (18 instead of 26 blocks per SM, +8.5 us at 8192^2).
            Expr word_max = schedx::u32(0);
            for (int j = 0; j < 4; j++) word_max = max(word_max, abs_input_bits(xbits(4 * x + j, y)));
            f8_words(x, y) = Tuple(packed, stored_abs_bits(word_max));
        } else {
            f8_words(x, y) = packed;
        }
        if (rows) (*rows)(x, y) = f8_word(x, y);
        // cols is [K][M/4 words]: word (y, x) packs byte x % 4 of rows 4y..4y+3 of
        // word column x / 4, by three byte permutes (PRMT): t64r8w4 has 1240 SASS
        // instructions per thread where shifts and masks gave 1288, on the integer
        // pipe, the kernel's busiest (76% at 8192^2, ncu).
        if (cols && cols_bytes) {
            (*cols)(y, x) = cast<uint8_t>(f8_word(x / 4, y) >> (cast<uint32_t>(x % 4) * 8));
        } else if (cols) {
            (*cols)(y, x) = schedx::transposed_word(get_target().has_feature(Target::CUDA), f8_word(x / 4, 4 * y),
                                                    f8_word(x / 4, 4 * y + 1), f8_word(x / 4, 4 * y + 2),
                                                    f8_word(x / 4, 4 * y + 3), x % 4);
        }
    }

    void define_fused_amax() {
        // The tiled kernels fuse it. thread_max(x, y): the maximum of the words that
        // thread (x % TX, y % TY) of tile (x / TX, y / TY) encoded (f8_words' second
        // element); warp_max: its warp's maximum, in every lane; tile_max: the tile's,
        // from the first lane of each of its warps. The whole amax is in place once the
        // kernel has finished.
        const ThreadGrid g = amax_grid();
        amax_tile_rdom = RDom(0, g.fw, 0, g.r, "t");
        const RDom &t = amax_tile_rdom;
        Expr wy = (y / g.ty) * tile_m() + (y % g.ty) * g.r + t.y;
        if (word_io) {
            Expr wx = (x / g.tx) * (tile / 4) + (x % g.tx) * g.fw + t.x;
            thread_max(x, y) = schedx::u32(0);
            thread_max(x, y) = max(thread_max(x, y), cast<uint32_t>(f8_words(wx, wy)[1]));
        } else {  // element tiles: thread l of a tile row encodes elements l, l + 32, ...
            Expr ex = (x / g.tx) * tile + t.x * g.tx + x % g.tx;
            thread_max(x, y) = schedx::u32(0);
            thread_max(x, y) = max(thread_max(x, y), cast<uint32_t>(f8(ex, wy)[1]));
        }
        warp_max(x, y) = schedx::warp_max_u32(thread_max(x, y));
        RDom w(0, g.tx * g.ty / 32, "w");
        tile_max(x, y) = schedx::u32(0);
        tile_max(x, y) = max(tile_max(x, y), warp_max(x * g.tx + (w * 32) % g.tx, y * g.ty + (w * 32) / g.tx));
        amax_warps = w;
        Expr scale_inv_write = Internal::Call::make(
            UInt(32), Internal::Call::if_then_else,
            {x == 0 && y == 0,
             schedx::device_atomic_u32_discarded("exch", *scale_inv_address, reinterpret<uint32_t>(1.0f / scale()), x),
             schedx::u32(0)},
            Internal::Call::PureIntrinsic);
        (*tile_sink)(x, y) =
            schedx::device_atomic_u32_discarded("max", *amax_address, abs_bits_of(tile_max(x, y)), x) | scale_inv_write;
    }

    void define_amax_pass() {
        // The separate kernels reduce 256 x 128 tiles as float bits; the CPU its cast's
        // tiles in the input format's bits (16 for bf16 and fp16: twice the vector lanes),
        // decoded per tile. Tiles may overhang the matrix: clamped coordinates repeat an
        // element, leaving a max unchanged.
        const bool cpu = sched.value() == "cpu";
        const int tw = cpu ? int(tile) : 256, th = cpu ? tile_m() : 128;
        Expr bits = element_bits(clamp(x, 0, extent_x() - 1), clamp(y, 0, extent_y() - 1));
        abs_bits(x, y) = cpu ? stored_abs_bits(abs_input_bits(bits)) : abs_bits_of(bits);
        amax_tile_rdom = RDom(0, tw, 0, th, "t");
        tile_max(x, y) = cast(abs_bits.type(), 0);
        tile_max(x, y) = max(tile_max(x, y), abs_bits(x * tw + amax_tile_rdom.x, y * th + amax_tile_rdom.y));
        amax_tiles = RDom(0, (extent_x() + tw - 1) / tw, 0, (extent_y() + th - 1) / th, "tiles");
        Expr one_tile = tile_max(amax_tiles.x, amax_tiles.y);
        (*amax)() = schedx::u32(0);
        (*amax)() = max((*amax)(), cpu ? abs_bits_of(one_tile) : one_tile);
        (*scale_inv)() = 1.0f / scale();
    }

    void set_all_estimates() {
        const int elems_per_word = word_io ? 32 / schedx::elem_bits(in_type) : 1;
        const int wide = word_io ? 4 : 1;
        input->set_estimates({{0, 8192 / elems_per_word}, {0, 8192}});
        fp8_format.set_estimate(0);
        if (rows) rows->set_estimates({{0, 8192 / wide}, {0, 8192}});
        if (cols) cols->set_estimates({{0, 8192 / (cols_bytes ? 1 : wide)}, {0, 8192}});
    }

    void schedule() {
        if (using_autoscheduler()) return;
        if (default_schedule) {
            if (sched.value() == "cuda_tiled" && word_io) constrain_tiled_words();
            return;
        }
        if (sched.value() == "cpu") {
            schedule_cpu();
        } else if (sched.value() == "cuda_general") {
            schedule_cuda_general();
        } else if (sched.value() == "cuda_tiled" && word_io) {
            schedule_cuda_tiled();
        } else if (sched.value() == "cuda_tiled") {
            schedule_cuda_tiled_elements();
        } else if (sched.value() == "cuda_skinny") {
            schedule_cuda_skinny();
        } else {
            throw std::invalid_argument("unknown schedule " + sched.value());
        }
    }

    Var x{"x"}, y{"y"}, xo{"xo"}, yo{"yo"}, xi{"xi"}, yi{"yi"}, xt{"xt"}, yt{"yt"};
    bool word_io = false, cols_bytes = false;  // cols_bytes: cols_io=element
    Input<Buffer<>> *input = nullptr;
    Output<Buffer<>> *rows = nullptr, *cols = nullptr;
    Output<Buffer<uint32_t, 0>> *amax = nullptr;
    Output<Buffer<uint32_t, 2>> *tile_sink = nullptr;
    Output<Buffer<float, 0>> *scale_inv = nullptr;  // the separate amax pass's
    Input<uint64_t> *amax_address = nullptr, *scale_inv_address = nullptr;
    Func xbits{"xbits"};  // element bits in a uint32
    Func f8{"f8"}, f8_words{"f8_words"};
    Func abs_bits{"abs_bits"};  // |x| as float bits (ordered like the values)
    Func tile_max{"tile_max"};  // max |x| bits per tile
    Func thread_max{"thread_max"}, warp_max{"warp_max"};  // fused amax: per thread, per warp
    RDom amax_tiles, amax_tile_rdom, amax_warps;

    Expr extent_x() { return input->dim(0).extent() * (word_io ? 32 / schedx::elem_bits(in_type) : 1); }
    Expr extent_y() { return input->dim(1).extent(); }
    Expr abs_bits_of(Expr bits) {
        return reinterpret<uint32_t>(schedx::decode_to_float(bits, in_type)) & schedx::u32(0x7FFFFFFF);
    }
    // |x| in the input format's own bits (sign cleared: they order like |x|, NaN above inf),
    // and as the fused amax stores them in shared memory: 16 bits for bf16 and fp16.
    Expr abs_input_bits(Expr bits) { return bits & schedx::u32(in_type != ElemType::fp32 ? 0x7FFF : 0x7FFFFFFF); }
    Expr stored_abs_bits(Expr abs) { return in_type != ElemType::fp32 ? cast<uint16_t>(abs) : abs; }
    // x * scale, or x / scale: strict_float keeps Halide and LLVM from a reciprocal multiply
    // or an approximate division (PTX div.approx / div.full): div.rn.f32 on CUDA, vdivps on
    // x86 (Halide 21 emits the same without it today; the marker keeps it so).
    Expr scaled(Expr value) {
        return scale_by == ScaleBy::divide ? strict_float(value / scale()) : value * scale();
    }

    // The fp8 code of f8 (a Tuple with |x|'s bits in element tiles with the fused amax).
    Expr f8_code(Expr ex, Expr ey) { return f8.outputs() > 1 ? f8(ex, ey)[0] : Expr(f8(ex, ey)); }
    // The packed fp8 word of f8_words (a Tuple with the words' max |x| when amax is fused).
    Expr f8_word(Expr wx, Expr wy) {
        return f8_words.outputs() > 1 ? f8_words(wx, wy)[0] : Expr(f8_words(wx, wy));
    }
    // Bits of element (ex, ey) in a uint32, from element- or word-typed input. The
    // separate amax reductions read through this with clamped coordinates; the tiled
    // kernels take it from xbits, whose loads they stage per thread.
    Expr element_bits(Expr ex, Expr ey) {
        if (in_type == ElemType::fp32) return reinterpret<uint32_t>((*input)(ex, ey));
        if (word_io) return ((*input)(ex / 2, ey) >> (cast<uint32_t>(ex % 2) * 16)) & schedx::u32(0xFFFF);
        return cast<uint32_t>((*input)(ex, ey));
    }

    int tile_m() const { return tile_rows > 0 ? int(tile_rows) : int(tile); }

    // The tiled kernels' threads per tile: tx across a tile row (each loads load_words input
    // words and encodes fw fp8 words per row) times ty down it (r rows each). The same
    // threads store the column-major output: cfw words of a column (16 bytes at most) for cr
    // columns each.
    struct ThreadGrid {
        int tx, ty, fw, r, cfw, cr;
    };
    ThreadGrid thread_grid() const {
        const int TK = tile, TM = tile_m(), R = rows_per_thread;
        const int tx = TK / (32 / schedx::elem_bits(in_type)) / load_words, fw = tx > 0 ? TK / 4 / tx : 0;
        const int ty = R > 0 ? TM / R : 0, cfw = tx > 0 ? TM / 4 / tx : 0, cr = ty > 0 ? TK / ty : 0;
        if (!(tx >= 1 && fw >= 1 && R >= 1 && TM % R == 0 && ty * tx <= 1024 && cfw >= 1 && cfw <= 4 &&
              (TM / 4) % tx == 0 && cr >= 1 && TK % ty == 0)) {
            throw std::invalid_argument("tile, tile_rows, rows_per_thread and load_words make no valid thread grid");
        }
        if (with_amax && ty * tx % 32 != 0) {
            throw std::invalid_argument("a fused amax needs whole warps per tile");
        }
        return {tx, ty, fw, R, cfw, cr};
    }

    // The threads of the fused amax's reduction: the word tiles' grid, or the element tiles'
    // 32 lanes along a tile row by tile_rows / rows_per_thread rows (fw: elements a thread
    // encodes per row, 32 apart).
    ThreadGrid amax_grid() const {
        if (word_io) return thread_grid();
        const int R = rows_per_thread;
        return {32, tile_m() / R, tile / 32, R, 0, 0};
    }

    // CPU (the fallback without a GPU): 2 cores of the build machine, AVX2, bf16 4096^2:
    // 10.0 ms against 16.9 ms for separate row and 32x32-tile column passes (each encoded
    // every element), 1024^2 0.66 vs 1.06 ms; 4095x4097 25.6 ms either way (guarded tails).
    void schedule_cpu() {
        const int vec = natural_vector_size<uint8_t>(), TK = tile, TM = tile_m();
        if (!cols && !with_amax) {
            // rows alone is elementwise: no fp8 tile to share, so rows vectorized with the encode
            // inline, strips of rows in parallel. AVX2, one thread, bf16 2048^2: 1.7 ms against 17
            // for the 64 x 64 fp8 tiles that both outputs share (eager PyTorch 10.2 ms).
            rows->split(y, yo, yi, 8, TailStrategy::GuardWithIf)
                .vectorize(x, vec, TailStrategy::GuardWithIf)
                .parallel(yo);
            return;
        }
        // Both outputs walk the same TM x TK tiles (rows of tiles in parallel); the fp8 tile
        // is encoded once per tile into cache and both outputs are written from it. 64 x 512
        // tiles (a cache line of cols per column): bf16 2048^2, one thread, AVX-512, 6.5 ms
        // against 13.0 for 64 x 64 (build machine, noisy, alternated in one process).
        Func first = rows ? *rows : (cols ? *cols : Func());
        if (rows) {
            rows->tile(x, y, xo, yo, xi, yi, TK, TM, TailStrategy::GuardWithIf)
                .reorder(xi, yi, xo, yo)
                .vectorize(xi, vec)
                .parallel(yo);
        }
        // cols reads a column of the fp8 tile per vector, a byte gather. AVX-512 (Halide's
        // wrapper runs that build wherever the CPU has it) gathers fast enough: one thread,
        // bf16 2048^2, 3.5 ms against 11-15 ms for the AVX2 build of the same schedule, 5.6
        // ms for the 16 x 16 blocks below (build machine, Zen 4, noisy). AVX2 instead
        // stages 16 x 16 blocks of the tile by dense row loads and writes cols from them:
        // 5.6-9.2 against 9.4-14.8 ms for the gather (alternated; docs/cast_transpose.md).
        const bool blocks = cols && !get_target().has_feature(Target::AVX512);
        if (cols) {
            cols->tile(y, x, yo, xo, yi, xi, TM, TK, TailStrategy::GuardWithIf).reorder(yi, xi, xo, yo).parallel(yo);
            if (blocks) {
                const int S = 16;
                Var ys("ys"), xs("xs");
                cols->tile(yi, xi, ys, xs, yi, xi, S, S).reorder(yi, xi, ys, xs).vectorize(yi).unroll(xi);
                f8.in(*cols).compute_at(*cols, ys).vectorize(x).unroll(y);
            } else {
                cols->vectorize(yi, vec);
            }
            if (rows) cols->compute_with(*rows, xo);
        }
        // A constant row pitch for the tile: cols' column reads take immediate offsets.
        if (rows || cols) f8.compute_at(first, xo).vectorize(x, vec, TailStrategy::GuardWithIf).bound_storage(x, TK);
        if (with_amax) {
            // Each cast tile's max, in vector lanes (rfactor over column groups), in the cast's
            // tile loops (compute_with) while the tile is in cache; amax folds the tiles' maxima.
            // Build machine, bf16 4096^2 with amax, a separate parallel pass of its own: 15.6 ->
            // 8.0 ms (the cast alone 7.8 ms); the scalar reduction cost as much as the cast.
            const int lanes = natural_vector_size(abs_bits.type());
            Var lane("lane");
            RVar txo("txo"), txi("txi");
            Func per_lane = tile_max.update().split(amax_tile_rdom.x, txo, txi, lanes).rfactor(txi, lane);
            tile_max.compute_root();
            for (Stage st : {Stage(tile_max), tile_max.update()}) {
                st.split(x, xo, xi, 1).split(y, yo, yi, 1).reorder(xi, yi, xo, yo).parallel(yo).compute_with(first, xo);
            }
            per_lane.compute_at(tile_max, xi).reorder_storage(lane, x, y).vectorize(lane);
            per_lane.update().vectorize(lane);
            // Partitioned over yo, every tile took the clamped tail version (x gathered element
            // by element): AVX-512, bf16 2048^2, one thread, 4.39 -> 2.45 ms (2.28 without amax).
            first.partition(yo, Partition::Never);
        }
    }

    // General CUDA path for any shape, leading dimension and alignment: element I/O, each
    // output its own kernel; the transposed output reads a 32x32 fp8 tile from shared memory.
    // H200, bf16 -> e4m3fn 8192^2: 242 us (28% of a 68.7 us copy in the same run): byte and
    // half-word accesses and a second read of x; it exists for shapes the tiles cannot take.
    void schedule_cuda_general() {
        if (rows) {
            rows->tile(x, y, xo, yo, xi, yi, 128, 8, TailStrategy::GuardWithIf)
                .split(xi, xt, xi, 4, TailStrategy::GuardWithIf)
                .reorder(xi, xt, yi, xo, yo)
                .unroll(xi)
                .gpu_blocks(xo, yo)
                .gpu_threads(xt, yi);
        }
        if (cols) {
            Func tile_f8 = f8.in(*cols);
            cols->tile(y, x, yo, xo, yi, xi, 32, 32, TailStrategy::GuardWithIf)
                .split(xi, xt, xi, 4, TailStrategy::GuardWithIf)
                .reorder(xi, yi, xt, yo, xo)
                .unroll(xi)
                .gpu_blocks(yo, xo)
                .gpu_threads(yi, xt);
            tile_f8.compute_at(*cols, yo)
                .store_in(MemoryType::GPUShared)
                .split(y, yt, y, 4, TailStrategy::GuardWithIf)
                .reorder(y, x, yt)
                .unroll(y)
                .gpu_threads(x, yt);
        }
        if (with_amax) schedule_amax_gpu();
    }

    // M or K of at most 63 (1 x K, K x 1, a few tokens): one thread per element of the long
    // dimension walks the short one, writing its rows element and its cols element per step;
    // rows and cols in one kernel (compute_with), no shared-memory transpose: along the long
    // dimension both outputs' stores are coalesced across the warp (one output's runs are
    // the short dimension's bytes per thread). The tiles need M, K >= 64 and the general
    // variant's 32 x 32 cols tiles are mostly idle here. H200: 1x8192 8.1 us, 16384x7 8.3 us
    // (ragged_2026-12-05_h200_b0d036e.md).
    void schedule_cuda_skinny() {
        if (with_amax) throw std::invalid_argument("cuda_skinny has no fused amax (the abs_max pass serves it)");
        if (!rows || !cols) throw std::invalid_argument("cuda_skinny writes both outputs");
        const bool along_k = long_dim.value() == "k";
        if (!along_k && long_dim.value() != "m") throw std::invalid_argument("long_dim is k or m");
        // rows(x = k, y = m); cols(y, x) is indexed (m, k) too, so the same loops serve both.
        const Var lng = along_k ? x : y, shrt = along_k ? y : x;
        Var lo("lo"), li("li");
        rows->split(lng, lo, li, 256, TailStrategy::GuardWithIf).reorder(shrt, li, lo).gpu_blocks(lo).gpu_threads(li);
        cols->split(lng, lo, li, 256, TailStrategy::GuardWithIf)
            .reorder(shrt, li, lo)
            .gpu_blocks(lo)
            .gpu_threads(li)
            .compute_with(*rows, shrt);
    }

    // amax in its own kernel (+65 us at 8192^2 on the H200, read-bound; the tiled variants
    // fuse it instead, schedule_amax_fused), one block per 256x128 tile: 256 threads each reduce a column
    // of the tile in registers (16 loads in flight; 8 gave 0.8 TB/s at 4096^2 on the H200), one thread folds them from shared memory, and one atomic max
    // per block lands in the output (an atomic per element took 15 ms at 4096^2 on the H200).
    void schedule_amax_gpu() {
        Var lane("lane");
        RVar rows_o("rows_o"), rows_i("rows_i");
        amax->update().atomic().gpu_blocks(amax_tiles.x, amax_tiles.y);
        tile_max.compute_at(*amax, amax_tiles.x);
        Func per_lane = tile_max.update().rfactor(amax_tile_rdom.x, lane);
        per_lane.compute_at(*amax, amax_tiles.x).gpu_threads(lane);
        per_lane.update()
            .split(amax_tile_rdom.y, rows_o, rows_i, 16)
            .unroll(rows_i)
            .gpu_threads(lane);
        amax->gpu_single_thread();
        scale_inv->gpu_single_thread();
    }

    // Whole tiles of tile_rows x tile elements, 32-bit word I/O: every stage of a block runs on
    // one TX x TY thread grid (fused stages share a block shape), each thread keeping
    // rows_per_thread 16-byte loads in flight. H200: t128x64r8w4_cvt 72.2 us at 8192^2, 88% of a
    // 1 GiB copy (quantize_axis_amax_2026-12-05_h200_f0ba1e9.md); what lost: docs/cast_transpose.md.
    // Both outputs have the input's (transposed) extent; word buffers from 0, rows in whole 16-byte vectors.
    void constrain_tiled_words() {
        const int T = tile, TM = tile_m();
        const int epw = 32 / schedx::elem_bits(in_type);
        Expr in_w = input->dim(0).extent(), m = input->dim(1).extent();
        input->dim(0).set_min(0).set_extent((in_w / (T / epw)) * (T / epw));
        input->dim(1).set_min(0).set_extent((m / TM) * TM).set_stride((input->dim(1).stride() / 4) * 4);
        // The runtime hands these variants 16-byte aligned pointers; saying so lets the
        // 8-byte output vectors be single stores (they were pairs of 4-byte ones).
        input->set_host_alignment(schedx::cast_layout::kWordVectorBytes);
        if (rows) rows->set_host_alignment(schedx::cast_layout::kWordVectorBytes);
        if (cols && !cols_bytes) cols->set_host_alignment(schedx::cast_layout::kWordVectorBytes);
        Expr k = input->dim(0).extent() * epw;
        if (rows) {
            rows->dim(0).set_min(0).set_extent(k / 4);
            rows->dim(1).set_min(0).set_extent(input->dim(1).extent()).set_stride((rows->dim(1).stride() / 4) * 4);
        }
        if (cols && cols_bytes) {
            cols->dim(0).set_min(0).set_extent(input->dim(1).extent());
            cols->dim(1).set_min(0).set_extent(k);
        } else if (cols) {
            cols->dim(0).set_min(0).set_extent(input->dim(1).extent() / 4);
            cols->dim(1).set_min(0).set_extent(k).set_stride((cols->dim(1).stride() / 4) * 4);
        }
    }

    void schedule_cuda_tiled() {
        const ThreadGrid g = thread_grid();
        const int T = tile, TM = tile_m(), R = g.r, LW = load_words, FW = g.fw;
        constrain_tiled_words();

        Func first = rows ? *rows : *cols;
        if (rows) {
            rows->tile(x, y, xo, yo, xi, yi, T / 4, TM, TailStrategy::RoundUp)
                .split(xi, xt, xi, FW, TailStrategy::RoundUp)
                .split(yi, yt, yi, R, TailStrategy::RoundUp)
                .reorder(xi, yi, xt, yt, xo, yo)
                .vectorize(xi)
                .unroll(yi)
                .gpu_blocks(xo, yo)
                .gpu_threads(xt, yt);
        }
        if (cols && cols_bytes) {
            // 32 lanes along m, so that each warp store is 32 contiguous bytes; the same
            // threads as rows (a multiple of 32, checked), each on T / (threads / 32) columns.
            const int threads = g.tx * g.ty, down = threads / 32;
            if (threads % 32 != 0 || TM % 32 != 0 || T % down != 0) {
                throw std::invalid_argument("cols_io=element needs whole warps, tile_rows a multiple of 32");
            }
            schedule_cols_by_lanes(T / down);
        } else if (cols) {
            // Same block loops (xo inner, yo outer) as rows, so the two can fuse.
            cols->split(y, yo, yi, TM / 4, TailStrategy::RoundUp)
                .split(x, xo, xi, T, TailStrategy::RoundUp)
                .split(yi, yt, yi, g.cfw, TailStrategy::RoundUp)
                .split(xi, xt, xi, g.cr, TailStrategy::RoundUp)
                .reorder(yi, xi, yt, xt, xo, yo)
                .vectorize(yi)
                .unroll(xi)
                .gpu_blocks(xo, yo)
                .gpu_threads(yt, xt);
            if (rows) cols->compute_with(*rows, xo);
        }
        // The fp8 tile lives in shared memory, padded by pad_words per row against bank
        // conflicts in the transposed reads. At most two fp8 words per vector: each reads its
        // input words 2x and 2x + 1 as two overlapping vectors of the staged words, and at four
        // (load_words 8) LLVM could not keep those in registers (a local-memory frame).
        Var xv("xv");
        f8_words.compute_at(first, xo)
            .store_in(MemoryType::GPUShared)
            .split(x, xt, x, FW, TailStrategy::RoundUp)
            .split(y, yt, y, R, TailStrategy::RoundUp)
            .split(x, xv, x, std::min(FW, 2))
            .reorder(x, xv, y, xt, yt)
            .vectorize(x)
            .unroll(xv)
            .unroll(y)
            .gpu_threads(xt, yt);
        if (pad_words > 0) f8_words.bound_storage(x, T / 4 + pad_words);
        // Each thread's input words go through registers: one 16-byte load per row.
        Func in_regs = input->in(xbits);
        in_regs.compute_at(f8_words, xt);
        stage_words_in_registers(in_regs, LW);
        if (with_amax) schedule_amax_fused(first, g);
    }

    // Whole tiles of tile_rows x tile elements with element I/O (io=element, issue 29): rows
    // and pointers need only the element's alignment, so a ragged M (ld_cols = M) or odd K
    // runs tiled instead of on cuda_general (H200: 4097x4096 62.6 us there, 25% of a copy).
    // 32 threads along a tile row, so that each warp access of x, rows and cols is one
    // contiguous run (64 bytes of bf16 x, 32 bytes of fp8), rows_per_thread rows each: a
    // thread has tile / 32 * rows_per_thread loads in flight. Each element is encoded once,
    // into an fp8 tile in shared memory whose rows are padded by one word, so that a warp's
    // column reads (cols) hit 32 banks. H200: 4097x4096 31.4 us, 1.54x 4096^2's time per byte
    // (ragged_2026-12-05_h200_b0d036e.md).
    void schedule_cuda_tiled_elements() {
        const int T = tile, TM = tile_m(), R = rows_per_thread, lanes = 32;
        const int ty = R > 0 ? TM / R : 0, cr = ty > 0 ? T / ty : 0;  // threads down a tile; cols' columns per thread
        if (!(T % lanes == 0 && TM % lanes == 0 && R >= 1 && TM % R == 0 && lanes * ty <= 1024 && cr >= 1 &&
              T % ty == 0)) {
            throw std::invalid_argument("tile, tile_rows and rows_per_thread make no valid element thread grid");
        }
        // Whole tiles only (the runtime covers the rest with shifted tiles, tile_cover.h).
        const Expr k = input->dim(0).extent(), m = input->dim(1).extent();
        input->dim(0).set_min(0).set_extent((k / T) * T);
        input->dim(1).set_min(0).set_extent((m / TM) * TM);
        if (rows) {
            rows->dim(0).set_min(0).set_extent(k);
            rows->dim(1).set_min(0).set_extent(m);
            rows->tile(x, y, xo, yo, xi, yi, T, TM, TailStrategy::RoundUp)
                .split(xi, xi, xt, lanes, TailStrategy::RoundUp)
                .split(yi, yt, yi, R, TailStrategy::RoundUp)
                .reorder(xi, yi, xt, yt, xo, yo)
                .unroll(xi)
                .unroll(yi)
                .gpu_blocks(xo, yo)
                .gpu_threads(xt, yt);
        }
        if (cols) {
            cols->dim(0).set_min(0).set_extent(m);
            cols->dim(1).set_min(0).set_extent(k);
            schedule_cols_by_lanes(cr);
        }
        Func first = rows ? *rows : *cols;
        f8.compute_at(first, xo)
            .store_in(MemoryType::GPUShared)
            .split(x, x, xt, lanes, TailStrategy::RoundUp)
            .split(y, yt, y, R, TailStrategy::RoundUp)
            .reorder(x, y, xt, yt)
            .unroll(x)
            .unroll(y)
            .gpu_threads(xt, yt)
            .bound_storage(x, T + 4);
        if (with_amax) schedule_amax_fused(first, amax_grid());
    }

    // cols stored by elements, 32 lanes along m (each warp store one contiguous run), each
    // thread on `columns` columns of the tile; the same block loops (xo inner, yo outer) as
    // rows, so that the two fuse.
    void schedule_cols_by_lanes(int columns) {
        const int T = tile, TM = tile_m();
        cols->split(y, yo, yi, TM, TailStrategy::RoundUp)
            .split(x, xo, xi, T, TailStrategy::RoundUp)
            .split(yi, yi, yt, 32, TailStrategy::RoundUp)
            .split(xi, xt, xi, columns, TailStrategy::RoundUp)
            .reorder(yi, xi, yt, xt, xo, yo)
            .unroll(yi)
            .unroll(xi)
            .gpu_blocks(xo, yo)
            .gpu_threads(yt, xt);
        if (rows) cols->compute_with(*rows, xo);
    }

    // A thread's input words (a wrapper of `input`, `words` per row) in registers, rows
    // unrolled. Vectors wider than 4 words are split into 16-byte loads (the widest PTX access).
    void stage_words_in_registers(Func staged, int words) {
        Var wo("wo"), wi("wi");
        staged.store_in(MemoryType::Register)
            .split(staged.args()[0], wo, wi, std::min(words, 4))
            .vectorize(wi)
            .unroll(wo)
            .unroll(staged.args()[1]);
    }

    // amax inside the tiled kernel, from stages fused with the cast's blocks: each thread folds
    // the word maxima it encoded, a REDUX per warp, one RED per tile into the caller's amax
    // (zeroed by a memset just before the kernel); the first tile writes scale_inv by an atomic
    // exchange. H200: 1.021-1.031x the cast alone (quantize_axis_amax_2026-12-05_h200_f0ba1e9.md);
    // what lost: docs/cast_transpose.md.
    void schedule_amax_fused(Func first, const ThreadGrid &g) {
        // Tile indices start at 0.
        tile_sink->dim(0).set_min(0);
        tile_sink->dim(1).set_min(0);
        // One thread per cast block, fused with its block loops (split by 1 so that the loops
        // carry their names).
        tile_sink->split(x, xo, xi, 1)
            .split(y, yo, yi, 1)
            .reorder(xi, yi, xo, yo)
            .gpu_blocks(xo, yo)
            .gpu_threads(xi)
            .compute_with(first, xo);
        tile_max.compute_at(*tile_sink, xi).update().unroll(amax_warps.x);
        // Every thread of the tile's grid: its words' maxima, read back from shared memory,
        // then its warp's by REDUX, into shared memory for the tile's one thread.
        warp_max.compute_at(*tile_sink, xo)
            .store_in(MemoryType::GPUShared)
            .split(x, xo, xi, g.tx, TailStrategy::RoundUp)
            .split(y, yo, yi, g.ty, TailStrategy::RoundUp)
            .reorder(xi, yi, xo, yo)
            .gpu_threads(xi, yi);
        thread_max.compute_at(warp_max, xi).update().unroll(amax_tile_rdom.x).unroll(amax_tile_rdom.y);
    }
};

}  // namespace

HALIDE_REGISTER_GENERATOR(CastTransposeFp8, cast_transpose)
