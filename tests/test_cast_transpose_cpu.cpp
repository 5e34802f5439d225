// CPU variants of the fused fp8 cast + transpose against the independent reference.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "cast_transpose_case.h"

using test::CastTransposeCase;
using test::check_cast_transpose;

namespace {

const float kScales[] = {1.0f, 10.0f, 0x1p-7f, 448.0f / 3.7f, 0x1p-12f /* most results fp8 subnormal */};

// All 65,536 16-bit patterns as a 256 x 256 matrix.
uint32_t all_patterns(int64_t i, int64_t j) { return uint32_t(i * 256 + j); }

}  // namespace

TEST_CASE("every bf16 and fp16 bit pattern, both formats, five scales, every output set") {
    for (schedx_dtype dt : {SCHEDX_BF16, SCHEDX_FP16}) {
        for (schedx_fp8_format f : {SCHEDX_E4M3FN, SCHEDX_E5M2}) {
            for (float s : kScales) {
                CAPTURE(dt);
                CAPTURE(f);
                CAPTURE(s);
                CastTransposeCase c{256, 256, 0, 0, 0, dt, f, s};
                CHECK(check_cast_transpose(c, all_patterns) == "");
                // 256 x 256 is below one 64 x 512 tile: untuned dispatch takes the untiled variant.
                CHECK(schedx_last_variant("cast_transpose") ==
                      std::string(dt == SCHEDX_BF16 ? "cast_transpose_bf16_cpu" : "cast_transpose_fp16_cpu"));
                c.cols = false;
                CHECK(check_cast_transpose(c, all_patterns) == "");
                c.cols = true;
                c.rows = false;
                CHECK(check_cast_transpose(c, all_patterns) == "");
            }
        }
    }
}

TEST_CASE("fp32: specials, rounding boundaries and dense random bits") {
    std::vector<uint32_t> bits{0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001,
                               0x00000001, 0x807FFFFF, 0x3F800000, 0x43E00000, 0x43E80000, 0x43F00000, 0x47600000,
                               0x47700000, 0x7F7FFFFF};
    // Midpoints and neighbours between consecutive e4m3/e5m2 values (ties, just above, just below).
    for (const ref::Fp8Table *t : {&ref::e4m3fn(), &ref::e5m2()}) {
        for (size_t c = 0; c + 1 < t->values.size(); c++) {
            const float mid = float((t->values[c] + t->values[c + 1]) / 2);
            const uint32_t mb = ref::float_to_bits(mid);
            for (uint32_t d : {mb - 1, mb, mb + 1}) {
                bits.push_back(d);
                bits.push_back(d | 0x80000000u);
            }
        }
    }
    std::mt19937 rng(7);
    while (bits.size() < 512 * 512) bits.push_back(rng());
    auto at = [&](int64_t i, int64_t j) { return bits[i * 512 + j]; };
    for (schedx_fp8_format f : {SCHEDX_E4M3FN, SCHEDX_E5M2}) {
        for (float s : kScales) {
            CAPTURE(f);
            CAPTURE(s);
            CHECK(check_cast_transpose({512, 512, 0, 0, 0, SCHEDX_FP32, f, s}, at) == "");
        }
    }
}

TEST_CASE("named edge shapes and leading dimensions") {
    // Finite values of every magnitude the encoder distinguishes, a pure function of (i, j).
    auto random_bf16 = [](int64_t i, int64_t j) {
        const uint32_t h = test::mix(uint32_t(i * 7919 + j));
        return uint32_t(ref::float_to_bf16(std::ldexp(float(h % 2000) - 1000.0f, int((h >> 12) % 30) - 25)));
    };
    struct Shape {
        int64_t m, k, ldx, ld_rows, ld_cols;
    };
    for (Shape sh : {Shape{1, 1, 0, 0, 0}, Shape{1, 1000, 0, 0, 0}, Shape{1000, 1, 0, 0, 0}, Shape{17, 33, 0, 0, 0},
                     Shape{4095, 4097, 0, 0, 0}, Shape{64, 64, 100, 70, 99}, Shape{17, 33, 40, 35, 21}}) {
        CAPTURE(sh.m);
        CAPTURE(sh.k);
        CAPTURE(sh.ldx);
        CHECK(check_cast_transpose({sh.m, sh.k, sh.ldx, sh.ld_rows, sh.ld_cols, SCHEDX_BF16, SCHEDX_E4M3FN, 3.0f},
                                   random_bf16) == "");
    }
}

TEST_CASE("amax and scale_inv") {
    auto with_nan = [](int64_t i, int64_t j) { return i == 5 && j == 7 ? 0xFFC1u : uint32_t(ref::float_to_bf16(float(i - j))); };
    auto finite = [](int64_t i, int64_t j) { return uint32_t(ref::float_to_bf16(float(i * 3 - j) / 7.0f)); };
    for (schedx_dtype dt : {SCHEDX_BF16, SCHEDX_FP16}) {
        for (auto *fn : {+with_nan, +finite}) {
            CastTransposeCase c{33, 65, 0, 0, 0, dt, SCHEDX_E4M3FN, 2.0f};
            c.amax = true;
            CHECK(check_cast_transpose(c, fn) == "");
            c.rows = false;
            CHECK(check_cast_transpose(c, fn) == "");
        }
    }
    // The fused-amax CPU variants (a maximum per cast tile) and the separate abs_max pass give
    // the same answer: the largest |x| in the last, ragged tile column (finite), a NaN in the
    // first tile or in the last element; several tiles each way.
    auto nan_last = [](int64_t i, int64_t j) { return i == 129 && j == 1099 ? 0x7FC0u : uint32_t(ref::float_to_bf16(float(i - j))); };
    for (const char *v : {"cast_transpose_bf16_cpu_amax", "cast_transpose_bf16_cpu_t64x512_amax", "cast_transpose_bf16_cpu"}) {
        for (auto *fn : {+with_nan, +finite, +nan_last}) {
            CAPTURE(v);
            CastTransposeCase c{130, 1100, 0, 0, 0, SCHEDX_BF16, SCHEDX_E5M2, 0.5f};
            c.amax = true;
            CHECK(schedx_force_variant("cast_transpose", v) == SCHEDX_OK);
            CHECK(check_cast_transpose(c, fn) == "");
            CHECK(schedx_last_variant("cast_transpose") == std::string(v));
        }
    }
    CHECK(schedx_force_variant("cast_transpose", nullptr) == SCHEDX_OK);
    // Untuned, an amax call takes the fused-amax tiles.
    CastTransposeCase c{130, 1100, 0, 0, 0, SCHEDX_BF16, SCHEDX_E4M3FN, 2.0f};
    c.amax = true;
    CHECK(check_cast_transpose(c, finite) == "");
    CHECK(schedx_last_variant("cast_transpose") == std::string("cast_transpose_bf16_cpu_t64x512_amax"));
}

TEST_CASE("every CPU cast_transpose variant, forced, on exhaustive patterns and ragged shapes") {
    const std::vector<schedx_variant_info> infos = test::variant_infos("cast_transpose", "cpu");
    REQUIRE(infos.size() >= 10);
    int refused = 0;
    for (const schedx_variant_info &info : infos) {
        const std::string name = info.name, params = info.params;
        auto has = [&](const char *kv) { return params.find(kv) != std::string::npos; };
        const schedx_dtype dt = has("in_type=fp32") ? SCHEDX_FP32 : (has("in_type=fp16") ? SCHEDX_FP16 : SCHEDX_BF16);
        CAPTURE(name);
        REQUIRE(schedx_force_variant("cast_transpose", name.c_str()) == SCHEDX_OK);
        std::vector<std::pair<int64_t, int64_t>> shapes{{256, 256}, {1, 1}, {17, 33}, {130, 70}};
        if (has("tile=")) shapes.push_back({200, 1100});  // ragged 64 x 512 tiles, several each way
        for (auto [m, k] : shapes) {
            CastTransposeCase c{m, k, 0, 0, 0, dt, SCHEDX_E4M3FN, 448.0f / 3.7f};
            c.rows = !has("outputs=cols");
            c.cols = !has("outputs=rows");
            c.amax = has("with_amax=true");
            c.divide = has("scale_by=divide");
            CAPTURE(m);
            CAPTURE(k);
            // Every 16-bit pattern; fp32 takes each as a bf16's upper half (every bf16 value,
            // specials included: the low 16 bits alone are subnormals that all encode as 0).
            const int shift = dt == SCHEDX_FP32 ? 16 : 0;
            const std::string result = check_cast_transpose(
                c, [shift](int64_t i, int64_t j) { return uint32_t((i * 256 + j) & 0xFFFF) << shift; });
            // Autoscheduled variants may refuse a shape their generated bounds do not accept
            // (tiles shifted inwards need the split factor), with a status; 256^2 they take.
            if (has("autoscheduler=") && m < 256 && result.rfind("status 11:", 0) == 0) {
                CHECK(result == "status 11: forced variant " + name +
                                    " cannot run this shape or alignment, or on this device");
                refused++;
                continue;
            }
            CHECK(result == "");
            CHECK(std::string(schedx_last_variant("cast_transpose")) == name);
            if (c.amax) {
                // The one largest |x| in the last row and column, in the overhanging tile where
                // there is one: the tiles' reads at the edge (the exhaustive patterns' amax is NaN).
                const uint32_t big = dt == SCHEDX_FP32 ? 0xC4000000u : (dt == SCHEDX_BF16 ? 0xC400u : 0xE000u);
                const int shift16 = dt == SCHEDX_FP32 ? 16 : 0;
                CHECK(check_cast_transpose(c, [m = m, k = k, big, shift16](int64_t i, int64_t j) {
                          return i == m - 1 && j == k - 1 ? big : uint32_t((i + 3 * j) % 64) << (7 + shift16);
                      }) == "");
            }
        }
    }
    CHECK(refused <= 6);  // the autoscheduled variants' 1 x 1 and 17 x 33 at most
    CHECK(schedx_force_variant("cast_transpose", nullptr) == SCHEDX_OK);
}

TEST_CASE("divide: x * (1 / s) gives another fp8 code than x / s for some bf16 and fp16 x, in both formats") {
    for (schedx_dtype dt : {SCHEDX_BF16, SCHEDX_FP16}) {
        for (const ref::Fp8Table *t : {&ref::e4m3fn(), &ref::e5m2()}) {
            int differ = 0;
            for (float s : test::kDivisors) {
                for (uint32_t b = 0; b < 65536; b++) {
                    const float v = test::element_value({1, 1, 0, 0, 0, dt}, b);
                    differ += ref::encode(v / s, *t) != ref::encode(v * (1.0f / s), *t);
                }
            }
            CAPTURE(dt);
            CHECK(differ >= 50);  // so a multiply by the reciprocal fails the test below
        }
    }
}

TEST_CASE("divide: every CPU divide variant, forced, on every bf16 and fp16 pattern, both formats, seven divisors") {
    int variants = 0;
    for (const schedx_variant_info &info : test::variant_infos("cast_transpose", "cpu")) {
        const std::string name = info.name, params = info.params;
        auto has = [&](const char *kv) { return params.find(kv) != std::string::npos; };
        if (!has("scale_by=divide")) continue;
        const schedx_dtype dt = has("in_type=fp32") ? SCHEDX_FP32 : (has("in_type=fp16") ? SCHEDX_FP16 : SCHEDX_BF16);
        CAPTURE(name);
        REQUIRE(schedx_force_variant("cast_transpose", name.c_str()) == SCHEDX_OK);
        for (schedx_fp8_format f : {SCHEDX_E4M3FN, SCHEDX_E5M2}) {
            for (float s : test::kDivisors) {
                CAPTURE(f);
                CAPTURE(s);
                CastTransposeCase c{256, 256, 0, 0, 0, dt, f, s};
                c.divide = true;
                c.rows = !has("outputs=cols");
                c.cols = !has("outputs=rows");
                // fp32 x: each 16-bit pattern as a bf16's upper half, and as its own low half
                // (fp32 subnormals, whose quotients by 2^-12 are no longer all 0).
                for (int shift : dt == SCHEDX_FP32 ? std::vector<int>{16, 0} : std::vector<int>{0}) {
                    CHECK(check_cast_transpose(c, [shift](int64_t i, int64_t j) { return uint32_t(i * 256 + j) << shift; }) ==
                          "");
                    CHECK(std::string(schedx_last_variant("cast_transpose")) == name);
                }
            }
        }
        variants++;
    }
    if (test::full_variant_list()) CHECK(variants == 15);  // bf16, fp16, fp32; both, rows, cols; both and cols as 64 x 512 tiles
    CHECK(schedx_force_variant("cast_transpose", nullptr) == SCHEDX_OK);
}

TEST_CASE("divide: dispatch takes divide variants only, and multiply calls never take them") {
    auto bits = [](int64_t i, int64_t j) { return uint32_t(ref::float_to_bf16(float(i * 37 - j * 11) / 9.0f)); };
    for (bool divide : {false, true}) {
        for (auto [rows, cols] : {std::pair<bool, bool>{true, true}, {true, false}, {false, true}}) {
            CastTransposeCase c{33, 65, 70, 67, 41, SCHEDX_BF16, SCHEDX_E4M3FN, 7.0f};
            c.divide = divide;
            c.rows = rows;
            c.cols = cols;
            CAPTURE(divide);
            CAPTURE(rows);
            CHECK(check_cast_transpose(c, bits) == "");
            const std::string last = schedx_last_variant("cast_transpose");
            CHECK((last.find("_divide") != std::string::npos) == divide);
        }
    }
    // A multiply variant forced on a divide call (and the reverse) cannot run it.
    CastTransposeCase c{16, 16, 0, 0, 0, SCHEDX_BF16, SCHEDX_E4M3FN, 7.0f};
    c.divide = true;
    REQUIRE(schedx_force_variant("cast_transpose", "cast_transpose_bf16_cpu") == SCHEDX_OK);
    CHECK(check_cast_transpose(c, bits).rfind("status 11:", 0) == 0);
    c.divide = false;
    REQUIRE(schedx_force_variant("cast_transpose", "cast_transpose_bf16_cpu_divide") == SCHEDX_OK);
    CHECK(check_cast_transpose(c, bits).rfind("status 11:", 0) == 0);
    CHECK(schedx_force_variant("cast_transpose", nullptr) == SCHEDX_OK);
}

TEST_CASE("current scaling: amax, then torchao's scale and its inverse, then the cast with that scale") {
    auto finite = [](int64_t i, int64_t j) { return uint32_t(ref::float_to_bf16(float(i * 3 - j) * 1.7e-3f)); };
    auto with_nan = [](int64_t i, int64_t j) { return i == 3 && j == 2 ? 0x7FC1u : uint32_t(ref::float_to_bf16(float(i - j))); };
    auto with_inf = [](int64_t i, int64_t j) { return i == 1 && j == 4 ? 0xFF80u : uint32_t(ref::float_to_bf16(float(i - j))); };
    auto zeros = [](int64_t, int64_t) { return 0u; };
    auto tiny = [](int64_t i, int64_t j) { return uint32_t(ref::float_to_bf16(float(i + j + 1) * 1e-20f)); };  // amax < 1e-12
    auto all_bits = [](int64_t i, int64_t j) { return uint32_t(i * 256 + j) & 0xFFFFu; };
    auto patterns = {+finite, +with_nan, +with_inf, +zeros, +tiny};
    for (schedx_fp8_format f : {SCHEDX_E4M3FN, SCHEDX_E5M2}) {
        for (bool pow2 : {false, true}) {
            int which = 0;
            for (auto *fn : patterns) {
                CAPTURE(f);
                CAPTURE(pow2);
                CAPTURE(which++);
                CastTransposeCase c{130, 70, 0, 0, 0, SCHEDX_BF16, f};
                c.current_scaling = true;
                c.pow2_scales = pow2;
                CHECK(check_cast_transpose(c, fn) == "");
                c.cols = false;
                CHECK(check_cast_transpose(c, fn) == "");
                c.cols = true;
                c.rows = false;
                c.ldx = 75;
                c.ld_cols = 131;
                CHECK(check_cast_transpose(c, fn) == "");
            }
        }
    }
    // fp16 and fp32 inputs; the fp32 amax 3.7 gives a scale that is no power of two.
    CastTransposeCase c16{256, 256, 0, 0, 0, SCHEDX_FP16, SCHEDX_E4M3FN};
    c16.current_scaling = true;
    CHECK(check_cast_transpose(c16, [&](int64_t i, int64_t j) { return all_bits(i, j) & 0x7BFFu; }) == "");
    for (bool pow2 : {false, true}) {
        CastTransposeCase c32{64, 96, 0, 0, 0, SCHEDX_FP32, SCHEDX_E5M2};
        c32.current_scaling = true;
        c32.pow2_scales = pow2;
        CHECK(check_cast_transpose(c32, [](int64_t i, int64_t j) {
                  return ref::float_to_bits(i == 7 && j == 9 ? -3.7f : float(i - j) / 100.0f);
              }) == "");
    }
    // An empty x: amax 0, so scale is fp8_max / 1e-12, with nothing cast.
    for (auto [m, k] : {std::pair<int64_t, int64_t>{0, 5}, {5, 0}}) {
        CastTransposeCase e{m, k, 0, 0, 0, SCHEDX_BF16, SCHEDX_E4M3FN};
        e.current_scaling = true;
        CHECK(check_cast_transpose(e, zeros) == "");
    }
}
