// Ragged shapes on the CPU: how the whole-tile CUDA kernels cover any M x K of at least
// one tile (every element once or more, nothing outside, launches 16-byte aligned where the
// runtime asks for it), which CUDA variant untuned dispatch picks for aligned and misaligned
// rows (cast_transpose, w8_linear), and the CPU variants on prime sizes, single rows and columns, odd leading dimensions
// (2-byte aligned rows) and a NaN or the largest value in the last element.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "cast_transpose_call.h"
#include "cast_transpose_case.h"
#include "dispatch.h"
#include "tile_cover.h"
#include "w8_linear_call.h"

using test::CastTransposeCase;
using test::check_cast_transpose;

TEST_CASE("cover_with_tiles: every element of every shape from one to three tiles, nothing outside") {
    const struct {
        int64_t tm, tk;
    } tiles[] = {{64, 64}, {128, 128}, {128, 64}, {16, 48}};
    for (const auto &t : tiles) {
        for (int64_t m = t.tm; m <= 3 * t.tm; m++) {
            for (int64_t k = t.tk; k <= 3 * t.tk; k++) {
                const std::vector<schedx::TileRegion> regions = schedx::cover_with_tiles(m, k, t.tm, t.tk);
                std::vector<int> covered(size_t(m * k), 0);
                bool ok = regions.size() == size_t(1 + (m % t.tm != 0) + (k % t.tk != 0) + (m % t.tm && k % t.tk));
                for (const schedx::TileRegion &r : regions) {
                    // Whole tiles inside the matrix; the shifted ones start at M - TM or K - TK.
                    ok &= r.rows > 0 && r.cols > 0 && r.rows % t.tm == 0 && r.cols % t.tk == 0 && r.row0 >= 0 &&
                          r.col0 >= 0 && r.row0 + r.rows <= m && r.col0 + r.cols <= k;
                    ok &= (r.row0 == 0 || r.row0 == m - t.tm) && (r.col0 == 0 || r.col0 == k - t.tk);
                    for (int64_t i = r.row0; ok && i < r.row0 + r.rows; i++) {
                        for (int64_t j = r.col0; j < r.col0 + r.cols; j++) covered[size_t(i * k + j)]++;
                    }
                }
                for (int c : covered) ok &= c >= 1;
                if (!ok) {
                    CAPTURE(t.tm);
                    CAPTURE(t.tk);
                    CAPTURE(m);
                    CAPTURE(k);
                    FAIL("bad cover");
                }
            }
        }
    }
}

namespace {

// The CUDA bf16 -> e4m3fn multiply cast variants writing both outputs, as the ABI's filter keeps them
// for a call with or without amax; autoscheduled ones are left out (their answer is a bounds
// query needing a CUDA context).
std::vector<const schedx::Variant *> cast_candidates(bool want_amax) {
    std::vector<const schedx::Variant *> out;
    for (const schedx::Variant &v : schedx::registry()) {
        if (v.op == "cast_transpose" && v.device == schedx::Device::cuda && v.param("in_type") == "bf16" &&
            v.param("outputs", "both") == "both" && v.param("fp8", "any") != "e5m2" &&
            (want_amax || v.param("with_amax") != "true") && v.param("autoscheduler").empty() &&
            v.param("scale_by", "multiply") == "multiply") {
            out.push_back(&v);
        }
    }
    return out;
}

}  // namespace

TEST_CASE("untuned CUDA dispatch: word tiles where rows are 16-byte aligned, element tiles where not, skinny for M up to 16 or K below a tile, general for M of 17 to 63") {
    static const std::vector<const schedx::Variant *> candidates = cast_candidates(false);
    // The element-I/O variants are listed after every other CUDA variant of the op but the
    // cols_io=element word tiles with the integer encoder, which are slower than them
    // (ragged_2026-12-05_h200_b46a0f6.md).
    size_t first_element = candidates.size(), last_other = 0;
    for (size_t i = 0; i < candidates.size(); i++) {
        const bool integer_cols_bytes = candidates[i]->param("cols_io") == "element" && candidates[i]->param("encoder") != "ptx";
        if (candidates[i]->param("io") == "element") first_element = std::min(first_element, i);
        else if (!integer_cols_bytes) last_other = i;
        else CHECK(i > first_element);
    }
    REQUIRE(first_element < candidates.size());
    CHECK(last_other < first_element);

    const uintptr_t base = uintptr_t(1) << 20;  // never dereferenced: tiled and general variants read pointer bits only
    struct Call {
        int64_t m, k, ldx, ld_rows, ld_cols, x_offset;
        const char *io;  // the first choice's io, or "general" or "skinny"
    };
    const Call calls[] = {
        {4096, 4096, 4096, 4096, 4096, 0, "word"},    {12000, 6000, 6000, 6000, 12000, 0, "word"},
        {4097, 4096, 4096, 4096, 4097, 0, "cols_bytes"}, {2999, 4001, 4001, 4001, 2999, 0, "element"},
        {512, 512, 513, 512, 512, 0, "element"},      {512, 512, 512, 512, 512, 2, "element"},
        {128, 200, 200, 200, 128, 0, "element"},      {64, 64, 64, 64, 64, 0, "word"},
        {64, 65, 65, 65, 64, 0, "element"},           {1, 8192, 8192, 8192, 1, 0, "skinny"},
        {8192, 1, 1, 1, 8192, 0, "skinny"},           {16, 4097, 4097, 4097, 16, 0, "skinny"},
        {17, 4096, 4096, 4096, 17, 0, "general"},     {48, 512, 512, 512, 48, 0, "general"},
        {63, 4096, 4096, 4096, 63, 0, "general"},     {4096, 63, 63, 63, 4096, 0, "skinny"},
    };
    for (int64_t n = 0; n < int64_t(sizeof calls / sizeof calls[0]); n++) {
        const Call &t = calls[n];
        CAPTURE(t.m);
        CAPTURE(t.k);
        CAPTURE(t.ldx);
        CAPTURE(t.x_offset);
        const schedx::CastTransposeCall c{reinterpret_cast<const void *>(base + t.x_offset), t.m, t.k, t.ldx, 2,
                                          nullptr, 0, reinterpret_cast<uint8_t *>(base << 4), reinterpret_cast<uint8_t *>(base << 8),
                                          t.ld_rows, t.ld_cols, nullptr, nullptr};
        const auto runs = [&](const schedx::Variant &v) { return schedx::can_run(v, c); };
        // A key of its own per call and list (runnable_variants caches by key, not by the predicates).
        const schedx::RunKey key{29, n, 0}, key_listed{29, n, 1};
        const auto ranked = schedx::runnable_variants(candidates, key, 90, runs,
                                                      [&](const schedx::Variant &v) { return schedx::untuned_rank(v, c); });
        const auto listed = schedx::runnable_variants(candidates, key_listed, 90, runs);
        REQUIRE(!ranked->empty());
        const schedx::Variant &chosen = *ranked->front();
        CAPTURE(chosen.name);
        const std::string_view schedule = chosen.param("schedule");
        const std::string io = schedule == "cuda_general"           ? "general"
                               : schedule == "cuda_skinny"          ? "skinny"
                               : chosen.param("cols_io") == "element" ? "cols_bytes"
                                                                    : std::string(chosen.param("io", "word"));
        CHECK(io == t.io);
        // Where a word tile runs, the choice is the one list order alone gave before the element
        // tiles, or with rows' pitch off 32 bytes the first 128-wide tile.
        if (io == "word" && t.ld_rows % 32 == 0) CHECK(listed->front() == &chosen);
        if (io == "word" && t.ld_rows % 32 != 0) {
            CHECK(chosen.param_int("tile", 64) == 128);
            for (const schedx::Variant *v : *listed) {
                if (v == &chosen) break;
                CHECK(v->param_int("tile", 64) < 128);
            }
        }
        // Element tiles take every call of at least one tile, whatever its alignment.
        for (const schedx::Variant *v : candidates) {
            if (v->param("io") != "element") continue;
            CAPTURE(v->name);
            CHECK(schedx::can_run(*v, c) == (t.m >= v->param_int("tile_rows", v->param_int("tile", 64)) &&
                                              t.k >= v->param_int("tile", 64)));
        }
    }
}

TEST_CASE("untuned CUDA dispatch of an amax call: a tile with the fused amax ahead of any tile that needs the abs_max pass") {
    static const std::vector<const schedx::Variant *> candidates = cast_candidates(true);
    const uintptr_t base = uintptr_t(1) << 20;  // never dereferenced
    float *const amax = reinterpret_cast<float *>(base << 12);
    struct Shape {
        int64_t m, k;
        const char *io;
    };
    // 4097 x 4096 would take the cols_element word tile without amax (the test above).
    const Shape shapes[] = {{4096, 4096, "word"}, {12000, 6000, "word"}, {4097, 4096, "element"}, {2999, 4001, "element"}};
    for (int64_t n = 0; n < int64_t(sizeof shapes / sizeof shapes[0]); n++) {
        const Shape &t = shapes[n];
        CAPTURE(t.m);
        CAPTURE(t.k);
        const schedx::CastTransposeCall c{reinterpret_cast<const void *>(base), t.m, t.k, t.k, 2, nullptr, 0,
                                          reinterpret_cast<uint8_t *>(base << 4), reinterpret_cast<uint8_t *>(base << 8),
                                          t.k, t.m, amax, nullptr};
        const schedx::RunKey key{31, n, 0};
        const auto ranked = schedx::runnable_variants(candidates, key, 90, [&](const schedx::Variant &v) { return schedx::can_run(v, c); },
                                                      [&](const schedx::Variant &v) { return schedx::untuned_rank(v, c); });
        REQUIRE(!ranked->empty());
        const schedx::Variant &chosen = *ranked->front();
        CAPTURE(chosen.name);
        CHECK(chosen.param("with_amax") == "true");
        CHECK(std::string(chosen.param("io", "word")) == t.io);
    }
}

TEST_CASE("CPU variants on ragged shapes: primes, single rows and columns, 2-byte aligned rows, amax at the edge") {
    struct Shape {
        int64_t m, k, ldx, ld_rows, ld_cols;
    };
    const Shape shapes[] = {{1, 1, 0, 0, 0},     {1, 8192, 0, 0, 0},   {7, 1637, 0, 0, 0},  {1637, 7, 0, 0, 0},
                            {1, 7, 9, 8, 3},     {127, 131, 133, 137, 129}, {97, 61, 63, 61, 101}, {299, 401, 0, 0, 0}};
    for (const Shape &sh : shapes) {
        for (schedx_dtype dt : {SCHEDX_BF16, SCHEDX_FP16, SCHEDX_FP32}) {
            for (bool nan : {false, true}) {
                CAPTURE(sh.m);
                CAPTURE(sh.k);
                CAPTURE(sh.ldx);
                CAPTURE(int(dt));
                CAPTURE(nan);
                const int64_t m = sh.m, k = sh.k;
                const uint32_t last = dt == SCHEDX_FP32 ? (nan ? 0xFFC00001u : 0x47800000u)
                                                        : (dt == SCHEDX_BF16 ? (nan ? 0xFFC1u : 0x4780u)
                                                                             : (nan ? 0xFE01u : 0x7BFFu));
                auto bits = [m, k, dt, last](int64_t i, int64_t j) -> uint32_t {
                    if (i == m - 1 && j == k - 1) return last;
                    const float v = float((i * 31 + j * 17) % 1000) / 16.0f - 30.0f;
                    if (dt == SCHEDX_FP32) return ref::float_to_bits(v);
                    if (dt == SCHEDX_BF16) return ref::float_to_bf16(v);
                    const _Float16 h = static_cast<_Float16>(v);  // exact: multiples of 1/16 below 2^6
                    uint16_t hb;
                    std::memcpy(&hb, &h, 2);
                    return hb;
                };
                CastTransposeCase c{sh.m, sh.k, sh.ldx, sh.ld_rows, sh.ld_cols, dt, SCHEDX_E4M3FN, 0.5f};
                c.amax = true;
                CHECK(check_cast_transpose(c, bits) == "");
            }
        }
    }
}

namespace {

// The first variant untuned CUDA dispatch ranks for a w8_linear call of these shapes, dtypes
// and bias on an sm_90 device, among the variants that serve them (autoscheduled ones left
// out: their answer is a bounds query needing a CUDA context). `key` must be the call's own
// (runnable_w8_variants caches by key).
const schedx::Variant &untuned_w8_choice(int64_t m, int64_t n, int64_t k, int64_t ldx, int64_t ldw, const char *x_type,
                                         const char *scale_type, bool bias, const schedx::RunKey &key) {
    // One list per dtypes and bias, at a stable address (runnable_variants caches by it too).
    static std::map<std::string, std::vector<const schedx::Variant *>> lists;
    std::vector<const schedx::Variant *> &candidates = lists[std::string(x_type) + scale_type + (bias ? "+bias" : "")];
    if (candidates.empty()) {
        for (const schedx::Variant &v : schedx::registry()) {
            if (v.op == "w8_linear" && v.device == schedx::Device::cuda && v.param("autoscheduler").empty() &&
                schedx::serves(v, x_type, scale_type, bias)) {
                candidates.push_back(&v);
            }
        }
    }
    const uintptr_t base = uintptr_t(1) << 20;  // never dereferenced: the rules read pointer bits only
    const schedx::W8LinearCall c{reinterpret_cast<const void *>(base), m, k, ldx,
                                 reinterpret_cast<const int8_t *>(base << 4), n, ldw,
                                 reinterpret_cast<const void *>(base << 8),
                                 bias ? reinterpret_cast<const void *>(base << 10) : nullptr,
                                 std::string(scale_type) == "fp32" ? 4 : 2, reinterpret_cast<void *>(base << 12), n};
    const auto ranked = schedx::runnable_w8_variants(candidates, key, 90, c);
    REQUIRE(!ranked->empty());
    return *ranked->front();
}

}  // namespace

TEST_CASE("untuned CUDA dispatch of w8_linear: K off the steps takes the k_tail kernels, rows off 4 bytes or odd K the element-I/O kernels, M = 3..16 the split-K tensor-core kernels") {
    struct Call {
        int64_t m, n, k, ldx, ldw;
        const char *schedule;  // the first choice's
        bool tail;             // a k_tail variant
        int64_t batch;         // its batch (small-batch and tensor-core kernels), else 0
        int64_t split_k = 0;   // its split_k (tensor-core kernels)
        int64_t rows_per_warp = 0;  // its rows of W per warp (tensor-core kernels)
        int64_t load_words = 0;     // its W words per lane and chunk (tensor-core kernels)
    };
    const Call calls[] = {
        {1, 4096, 4096, 4096, 4096, "cuda_gemv", false, 0},
        {1, 64, 4096, 4096, 4096, "cuda_splitk", false, 0},   // few, long rows
        {1, 64, 4100, 4100, 4100, "cuda_gemv", true, 0},      // long rows, but split-K needs whole steps
        {1, 4096, 4544, 4544, 4544, "cuda_gemv", true, 0},
        {2, 64, 48, 48, 48, "cuda_smallbatch", true, 2},      // less than one step
        {3, 64, 1000, 1000, 1000, "cuda_smallbatch", true, 4},
        {17, 64, 1000, 1000, 1000, "cuda_smallbatch", true, 16},  // past the batch: K off 16 leaves cuBLAS out
        {100, 64, 4100, 4100, 4100, "cuda_smallbatch", true, 16},
        {1, 4096, 11008, 11008, 11008, "cuda_gemv", true, 0}, // whole steps only of 256: the 16-byte tail kernel
        {4, 4096, 4544, 4544, 4544, "cuda_mma", true, 8, 16},  // K off every split's step: the k_tail form
        {16, 4097, 4096, 4096, 4096, "cuda_mma", false, 16, 16},  // N off 16: tensor cores, not the int8 planes path
        {2, 8192, 8192, 8192, 8192, "cuda_smallbatch", false, 2},  // M = 2 stays off the tensor cores
        {3, 8192, 8192, 8192, 8192, "cuda_mma", false, 8, 8},
        {8, 14336, 4096, 4096, 4096, "cuda_mma", false, 8, 4},
        {9, 4096, 14336, 14336, 14336, "cuda_mma", false, 16, 16},
        {4, 4096, 4608, 4608, 4608, "cuda_mma", false, 8, 8},  // K off split 16's step of 1024: split 8, whole steps
        {16, 4096, 11008, 11008, 11008, "cuda_mma", true, 16, 16},
        // K off 16: the k_tail forms with 8-byte W loads (K in whole 8s), else 4-byte ones (whole 4s)
        {4, 4096, 4100, 4100, 4100, "cuda_mma", true, 8, 16, 16, 1},
        {16, 4096, 4100, 4100, 4100, "cuda_mma", true, 16, 16, 16, 1},
        {4, 8192, 8196, 8196, 8196, "cuda_mma", true, 8, 8, 16, 1},
        {4, 4096, 5000, 5000, 5000, "cuda_mma", true, 8, 16, 16, 2},
        {4, 8192, 8200, 8200, 8200, "cuda_mma", true, 8, 8, 16, 2},
        {16, 14336, 4100, 4100, 4100, "cuda_mma", true, 16, 4, 16, 1},  // past N = 12288 split 4
        {16, 8192, 8200, 8200, 8200, "cuda_mma", true, 16, 8, 16, 2},
        {4, 4096, 4544, 4544, 4544, "cuda_mma", true, 8, 16, 16, 4},  // K in whole 64s: 16-byte loads
        // M = 17..64: b32 / b64, N / rows_per_warp * split_k nearest 2048 warps, 32 rows per warp on a tie
        {32, 8192, 8192, 8192, 8192, "cuda_mma", false, 32, 8, 32},
        {32, 14336, 4096, 4096, 4096, "cuda_mma", false, 32, 4, 32},
        {32, 4096, 14336, 14336, 14336, "cuda_mma", false, 32, 8, 16},
        {17, 4096, 14336, 14336, 14336, "cuda_mma", false, 32, 8, 16},
        {64, 8192, 8192, 8192, 8192, "cuda_mma", false, 64, 4, 16},
        {64, 14336, 4096, 4096, 4096, "cuda_row_blocks", false, 0},  // M = 33..64 at N > 12288: the int8 planes path
        {48, 4096, 14336, 14336, 14336, "cuda_mma", false, 64, 8, 16},
        {64, 4096, 4100, 4100, 4100, "cuda_smallbatch", true, 16},  // K off 64: no b64 k_tail form, the lane tiles
        {16, 1024, 1024, 1024, 1024, "cuda_smallbatch", false, 16},  // below 2^24 weights: untimed on tensor cores
        {1, 64, 4098, 4098, 4098, "cuda_gemv", true, 0},      // W rows 2-byte aligned: element I/O
        {3, 64, 4096, 4097, 4096, "cuda_smallbatch", true, 4},  // x rows 2-byte aligned: element I/O
        {1, 4096, 11009, 11009, 11009, "cuda_gemv", true, 0},  // odd K: element I/O
        {16, 4096, 11009, 11009, 11009, "cuda_smallbatch", true, 16},
    };
    for (int64_t n = 0; n < int64_t(sizeof calls / sizeof calls[0]); n++) {
        const Call &t = calls[n];
        CAPTURE(t.m);
        CAPTURE(t.n);
        CAPTURE(t.k);
        const schedx::Variant &chosen =
            untuned_w8_choice(t.m, t.n, t.k, t.ldx, t.ldw, "bf16", "bf16", false, schedx::RunKey{8, n, 0});
        CAPTURE(chosen.name);
        CHECK(chosen.param("schedule") == t.schedule);
        CHECK((chosen.param("k_tail") == "true") == t.tail);
        if (t.batch) CHECK(chosen.param_int("batch", 0) == t.batch);
        if (t.split_k) CHECK(chosen.param_int("split_k", 0) == t.split_k);
        if (t.rows_per_warp) CHECK(chosen.param_int("rows_per_warp", 0) == t.rows_per_warp);
        if (t.load_words) CHECK(chosen.param_int("load_words", 4) == t.load_words);
    }
}

TEST_CASE("untuned CUDA dispatch of w8_linear: bias and fp16 calls take the split-K tensor-core forms that exist for them") {
    struct Call {
        int64_t m, n, k;
        const char *x_type, *scale_type;
        bool bias;
        const char *schedule;  // the first choice's
    };
    const Call calls[] = {
        {5, 4096, 8192, "bf16", "bf16", true, "cuda_mma"},    // bias: split 8, the one bias split
        {16, 4096, 8192, "bf16", "bf16", true, "cuda_mma"},
        {5, 8192, 4096, "fp16", "fp32", false, "cuda_mma"},
        {16, 8192, 4096, "fp16", "fp32", false, "cuda_mma"},
        {5, 8192, 4096, "fp16", "fp32", true, "cuda_smallbatch"},  // no fp16 bias form: the lane tiles
        {17, 4096, 8192, "bf16", "bf16", true, "cuda_row_blocks"},  // past M = 16: the int8 planes path
        {5, 2048, 4096, "bf16", "bf16", true, "cuda_smallbatch"},   // below 2^24 weights
    };
    for (int64_t n = 0; n < int64_t(sizeof calls / sizeof calls[0]); n++) {
        const Call &t = calls[n];
        CAPTURE(t.m);
        CAPTURE(t.n);
        CAPTURE(t.x_type);
        CAPTURE(t.bias);
        const schedx::Variant &chosen =
            untuned_w8_choice(t.m, t.n, t.k, t.k, t.k, t.x_type, t.scale_type, t.bias, schedx::RunKey{9, n, 0});
        CAPTURE(chosen.name);
        CHECK(chosen.param("schedule") == t.schedule);
    }
}

TEST_CASE("untuned CUDA dispatch of a divide call: its word tile from sm_89, else its element tile, skinny and general by the multiply rules") {
    std::vector<const schedx::Variant *> candidates;
    for (const schedx::Variant &v : schedx::registry()) {
        if (v.op == "cast_transpose" && v.device == schedx::Device::cuda && v.param("in_type") == "bf16" &&
            v.param("outputs", "both") == "both" && v.param("fp8", "any") != "e5m2" && v.param("scale_by") == "divide") {
            candidates.push_back(&v);
        }
    }
    REQUIRE(candidates.size() == 5);  // the word tile, the element tile, skinny along k and m, general
    const uintptr_t base = uintptr_t(1) << 20;  // never dereferenced
    struct Call {
        int64_t m, k;
        int sm;
        const char *chosen;
    };
    const Call calls[] = {{4096, 4096, 90, "cast_transpose_bf16_e4m3_t64r8w4_cvt_divide"},
                          {4096, 4096, 80, "cast_transpose_bf16_e4m3_t64r8_element_io_divide"},
                          {4097, 4096, 90, "cast_transpose_bf16_e4m3_t64r8_element_io_divide"},
                          {1, 8192, 90, "cast_transpose_bf16_skinny_k_divide"},
                          {4096, 63, 90, "cast_transpose_bf16_skinny_m_divide"},
                          {40, 4096, 90, "cast_transpose_bf16_cuda_general_divide"}};
    for (int64_t n = 0; n < int64_t(sizeof calls / sizeof calls[0]); n++) {
        const Call &t = calls[n];
        CAPTURE(t.m);
        CAPTURE(t.k);
        CAPTURE(t.sm);
        schedx::CastTransposeCall c{reinterpret_cast<const void *>(base), t.m, t.k, t.k, 2, nullptr, 0,
                                    reinterpret_cast<uint8_t *>(base << 4), reinterpret_cast<uint8_t *>(base << 8),
                                    t.k, t.m, nullptr, nullptr};
        c.divide = true;
        const schedx::RunKey key{45, n, 0};  // a key of its own per call (runnable_variants caches by key)
        const auto ranked = schedx::runnable_variants(
            candidates, key, t.sm, [&](const schedx::Variant &v) { return schedx::can_run(v, c); },
            [&](const schedx::Variant &v) { return schedx::untuned_rank(v, c); });
        REQUIRE(!ranked->empty());
        CHECK(ranked->front()->name == t.chosen);
    }
}
